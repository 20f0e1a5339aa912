"""One model request through a fresh guardrail pipeline: the step every kind of turn repeats."""

from __future__ import annotations

from collections.abc import Generator

from engine.backends.base import Backend, Message, Request, StreamInfo
from engine.cancel import CancelToken
from engine.events import ContentDelta, PromptLogprobs, PromptProgress, ThinkingDelta, TokenLogprobs
from engine.reply.pipeline import ReplyPipeline
from engine.reply.scaffolding import SpanSink
from engine.turns.content_logprobs import ContentLogprobs
from engine.turns.tally import Tally

Delta = ThinkingDelta | ContentDelta | TokenLogprobs | PromptProgress | PromptLogprobs
Round = Generator[Delta, None, tuple[ReplyPipeline | None, StreamInfo]]


def fold_system(messages: tuple[Message, ...], line: str) -> tuple[Message, ...]:
    """Append `line` to the single system message, creating it when there is none."""
    if messages and messages[0].get("role") == "system":
        first = messages[0].copy()
        content = str(first.get("content") or "").rstrip()
        first["content"] = f"{content}\n\n{line}" if content else line
        return (first, *messages[1:])
    return ({"role": "system", "content": line}, *messages)


def stream_round(
    backend: Backend, request: Request, cancel: CancelToken, tally: Tally, span_sink: SpanSink | None = None
) -> Round:
    """One model request through a fresh guardrail pipeline, counted in `tally`.

    `span_sink` gets each scaffolding span the guardrail closes (a tool turn parses calls).

    Yields the deltas (and the backend's prompt progress, which is not a piece); returns the
    pipeline (None when no piece came) and the stream's info.
    """
    tally.attempts += 1
    info = StreamInfo()
    pipeline: ReplyPipeline | None = None
    logprobs = ContentLogprobs()  # the content's tokens only, as OpenAI's logprobs are
    pieces = 0
    try:
        for piece in backend.stream(request, cancel, info):
            if isinstance(piece, PromptProgress):
                yield piece
                continue
            if pipeline is None:
                pipeline = ReplyPipeline(prefilled=info.prefilled_thinking, span_sink=span_sink)
            tally.mark_piece()
            pieces += 1
            if request.logprobs is None:
                yield from pipeline.feed(piece)
                continue
            stripped = pipeline.stripped_chars
            deltas = pipeline.feed(piece)
            yield from logprobs.sort(piece, deltas, pipeline.stripped_chars > stripped)
        if pipeline is not None:
            yield from logprobs.sort(None, pipeline.flush(), False)
    finally:
        tally.add(info, pieces, pipeline.stripped_chars if pipeline is not None else 0)
    return pipeline, info


def raw_round(backend: Backend, request: Request, cancel: CancelToken, tally: Tally) -> Round:
    """A raw prompt's continuation (`Request.prompt`): the text as the model wrote it, through no
    guardrail (no thinking split, nothing stripped), as a completions API returns it. A scored
    prompt's log probabilities (`Request.score_prompt`) come first, as one `PromptLogprobs`."""
    tally.attempts += 1
    info = StreamInfo()
    pieces = 0
    scored = False
    try:
        for piece in backend.stream(request, cancel, info):
            if isinstance(piece, PromptProgress):
                yield piece
                continue
            if info.prompt_logprobs and not scored:
                scored = True
                yield PromptLogprobs(info.prompt_logprobs)
            tally.mark_piece()
            pieces += 1
            if piece.logprobs:
                yield TokenLogprobs(piece.logprobs)
            if piece.text:
                yield ContentDelta(piece.text)
        if info.prompt_logprobs and not scored:  # nothing generated (`max_tokens: 0`)
            yield PromptLogprobs(info.prompt_logprobs)
    finally:
        tally.add(info, pieces, 0)
    return None, info
