"""One user turn: stream a reply through the pipeline, recover once if it is empty.

The policy is fixed and deterministic. A round whose visible content is empty after the
guardrail gets exactly one recovery request (same messages, Ember's correction line folded
into the system message, no tools, a fresh pipeline). If that is empty too the turn ends
with `MalformedReplyError`, reported as `TurnError("malformed_reply", …)`. No model ever
judges or repairs output.

Consumers: after a `Recovery` event the deltas that follow belong to the new attempt, so a
view resets the in-progress reply.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Iterator

from engine.backend import Backend, CancelToken, Message, Request, StreamInfo
from engine.errors import (
    BackendError,
    ConfigError,
    ContextOverflowError,
    LLMError,
    MalformedReplyError,
    ScriptExhaustedError,
)
from engine.events import ContentDelta, Event, Recovery, ThinkingDelta, TurnDone, TurnError, TurnStats
from engine.pipeline import ReplyPipeline
from engine.tally import Tally

log = logging.getLogger("engine.turn")

NO_TOOLS_LINE = (
    "Answer in plain text. No tools are available in this conversation: never write tool calls "
    "or tool-call syntax."
)
CORRECTION_LINE = (
    "Your previous reply had no visible answer. Reply to the user directly in plain text, "
    "without tool calls, special tokens or markup."
)


def fold_system(messages: tuple[Message, ...], line: str) -> tuple[Message, ...]:
    """Append `line` to the single system message, creating it when there is none."""
    if messages and messages[0].get("role") == "system":
        first = dict(messages[0])
        content = str(first.get("content") or "").rstrip()
        first["content"] = f"{content}\n\n{line}" if content else line
        return (first, *messages[1:])
    return ({"role": "system", "content": line}, *messages)


class TurnRunner:
    """Runs turns against one backend. Call `run` on the thread that owns the backend."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def run(self, request: Request, cancel: CancelToken | None = None) -> Iterator[Event]:
        """Yield the turn's events; always ends with exactly one TurnDone or TurnError."""
        cancel = cancel or CancelToken()
        tally = Tally()
        outcome, kind = "completed", ""
        try:
            yield from self._rounds(request, cancel, tally)
            outcome = "stopped" if tally.finish_reason == "cancelled" else "completed"
            yield TurnDone(tally.stats())
        except MalformedReplyError as exc:
            outcome, kind = "malformed", "malformed_reply"
            yield TurnError(kind, str(exc), tally.stats())
        except (LLMError, ConfigError) as exc:
            outcome, kind = "error", error_kind(exc)
            yield TurnError(kind, str(exc), tally.stats())
        finally:
            _log_turn(tally.stats(), outcome, kind)

    def _rounds(self, request: Request, cancel: CancelToken, tally: Tally) -> Iterator[Event]:
        if not request.tools:
            request = request.with_(messages=fold_system(request.messages, NO_TOOLS_LINE))
        visible = yield from self._round(request, cancel, tally)
        if visible or cancel.cancelled:
            return
        yield Recovery("empty_reply")
        retry = request.with_(messages=fold_system(request.messages, CORRECTION_LINE), tools=None)
        visible = yield from self._round(retry, cancel, tally)
        if not visible and not cancel.cancelled:
            raise MalformedReplyError()

    def _round(self, request: Request, cancel: CancelToken, tally: Tally) -> Generator[Event, None, bool]:
        """Stream one model request; return whether it produced visible content."""
        pipeline, _ = yield from stream_round(self.backend, request, cancel, tally)
        return pipeline is not None and bool(pipeline.content.strip())


Round = Generator[ThinkingDelta | ContentDelta, None, tuple[ReplyPipeline | None, StreamInfo]]


def stream_round(backend: Backend, request: Request, cancel: CancelToken, tally: Tally) -> Round:
    """One model request through a fresh guardrail pipeline, counted in `tally`.

    Yields the deltas; returns the pipeline (None when no piece came) and the stream's info.
    """
    tally.attempts += 1
    info = StreamInfo()
    pipeline: ReplyPipeline | None = None
    pieces = 0
    try:
        for piece in backend.stream(request, cancel, info):
            if pipeline is None:
                pipeline = ReplyPipeline(prefilled=info.prefilled_thinking)
            tally.mark_piece()
            pieces += 1
            yield from pipeline.feed(piece)
        if pipeline is not None:
            yield from pipeline.flush()
    finally:
        tally.add(info, pieces, pipeline)
    return pipeline, info


def quiet_round(backend: Backend, request: Request, cancel: CancelToken,
                tally: Tally) -> tuple[ReplyPipeline | None, StreamInfo]:
    """`stream_round` with its deltas discarded, for callers that only need the result."""
    rounds = stream_round(backend, request, cancel, tally)
    while True:
        try:
            next(rounds)
        except StopIteration as done:
            return done.value


def error_kind(exc: BaseException) -> str:
    """The `TurnError.kind` for an engine error."""
    if isinstance(exc, ContextOverflowError):
        return "context_full"
    if isinstance(exc, ScriptExhaustedError):
        return "script"
    if isinstance(exc, ConfigError):
        return "config"
    if isinstance(exc, BackendError):
        return "backend"
    return "llm"


def _log_turn(stats: TurnStats, outcome: str, kind: str) -> None:
    extra = f" error={kind}" if kind else ""
    log.info(
        "turn outcome=%s%s attempts=%d tokens=%d ttft_ms=%d tokens_per_s=%.1f "
        "total_ms=%d retries=%d scaffold_stripped=%d",
        outcome, extra, stats.attempts, stats.tokens, stats.ttft_ms, stats.tokens_per_s,
        stats.total_ms, stats.retries, stats.scaffold_stripped,
    )
