"""One chat completion: a turn on the engine, its events as OpenAI's response or stream chunks.

The turn is the session's (`open_request_async`, the same `Plan`, `Turn` and recorder as the
window's and the CLI's): the request is the prompt, measured by the same fit and refused when
it does not fit the context (`context_length_exceeded`), never cut; `--record` records it.

`TurnJob` runs the turn as its own task once the request holds the model, and keeps the
model until the engine's worker has really stopped, whatever happens to the HTTP side: a
client that disconnects only cancels the turn (within one token, the backends check
between pieces), and the next request in line gets the model when the worker is free.

`Reply` folds events into the answer: thinking goes to `reasoning_content`, never into
`content`; tool calls parsed from the model's markup go to `tool_calls`; a structured
turn's value is the content, as JSON text; `stop` sequences end the content and the turn.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from desktop.serve.documents import extension, open_collection
from desktop.serve.forced_calls import forced_calls
from desktop.serve.record import ApiHistory
from desktop.serve.wire import ChatCall
from engine.api.conversations import error_kind
from engine.api.documents import DocsDatabaseError, TurnDocuments
from engine.api.errors import EngineError
from engine.api.session import Engine, StopMatcher, open_request_async
from engine.api.values import (
    CancelToken,
    ContentDelta,
    Event,
    PromptLogprobs,
    Request,
    Sources,
    StructuredValue,
    ThinkingDelta,
    TokenLogprob,
    TokenLogprobs,
    ToolCall,
    TurnDone,
    TurnError,
    TurnErrorKind,
    TurnStats,
)

_END = object()


def choice_call(call: ChatCall, index: int) -> ChatCall:
    """The call for choice `index` of `n`: its seed is the request's plus the index (None stays random)."""
    seed = call.sampling.seed
    if index == 0 or seed is None:
        return call
    return replace(call, sampling=replace(call.sampling, seed=(seed + index) % 2**32))


def request_for(call: ChatCall) -> Request:
    return Request(
        messages=call.messages,
        tools=call.tools,
        sampling=call.sampling,
        max_tokens=call.max_tokens,
        schema=call.schema,
        schema_hint=call.schema_hint,
        verbatim=True,
        logprobs=call.logprobs,
        prompt=call.prompt,
        suffix=call.suffix,
        score_prompt=call.prompt is not None and call.echo and call.logprobs is not None,
    )


class TurnJob:
    """The turn of one request, running on the engine; `events()` hands its events over."""

    def __init__(
        self, engine: Engine, call: ChatCall, on_end: Callable[[], None], history: ApiHistory | None, model: str
    ) -> None:
        self.cancel = CancelToken()
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._on_end = on_end
        self.task = asyncio.ensure_future(self._run(engine, call, history, model))

    async def _run(self, engine: Engine, call: ChatCall, history: ApiHistory | None, model: str) -> None:
        """The session's turn for the request (`open_request_async`: fitted, `--record`ed); its documents'
        passages come first (`"ember": {"collection": ...}`). The request's tools are offered, not run:
        the turn's calls are the answer."""
        docs: TurnDocuments | None = None
        try:
            docs = await open_collection(call.collection) if call.collection else None
            session = history.session() if history is not None else None
            turn = await open_request_async(engine, request_for(call), documents=docs, record=session, model=model)
            forced = _forced(engine, turn.request, call, self.cancel) if call.forced is not None else None
            async for event in turn.run_async(engine, self.cancel, events=forced):
                self._queue.put_nowait(event)
        except DocsDatabaseError as exc:  # the collection went away since the request was checked
            self._queue.put_nowait(TurnError(TurnErrorKind.CONFIG, str(exc), TurnStats()))
        except EngineError as exc:  # e.g. no model loaded
            self._queue.put_nowait(TurnError(error_kind(exc), str(exc), TurnStats()))
        except Exception as exc:  # a bug must still end the response, not hang it
            self._queue.put_nowait(TurnError(TurnErrorKind.BACKEND, f"internal error: {exc}", TurnStats()))
            raise
        finally:
            if docs is not None:
                docs.close()
            self._queue.put_nowait(_END)
            self._on_end()

    def abandon(self) -> None:
        """The server is stopping: end `events()` now and cancel the turn, without waiting for the model.

        Cancelling the task alone is not enough: the engine waits for its worker to reach a
        cancel check, which a long step (a 60 s pause, a stuck C call) never does in time.
        """
        self.cancel.cancel()
        self._queue.put_nowait(_END)
        self.task.cancel()

    async def events(self) -> AsyncGenerator[Event, None]:
        """The turn's events; leaving early (a disconnect) cancels the turn."""
        try:
            while (event := await self._queue.get()) is not _END:
                yield event
        finally:
            self.cancel.cancel()


async def _forced(engine: Engine, request: Request, call: ChatCall, cancel: CancelToken) -> AsyncGenerator[Event]:
    """`tool_choice` asks for calls: the turn's events are the calls' (desktop.serve.forced_calls)."""
    assert call.forced is not None
    for event in await forced_calls(engine, request, call.forced, cancel, parallel=call.parallel_calls):
        yield event


@dataclass
class Reply:
    """The answer so far; `take(event)` returns the stream delta the event adds (None if nothing)."""

    call: ChatCall
    cancel: CancelToken
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    stats: TurnStats = field(default_factory=TurnStats)
    error: TurnError | None = None
    finished: bool = False
    logprobs: list[TokenLogprob] = field(default_factory=list)
    index: int = 0  # the choice's index (`n`)
    prompt_logprobs: tuple[TokenLogprob, ...] = ()  # a scored prompt's (`/v1/completions` echo)
    sources: Sources | None = None  # `"ember": {"collection": ...}`: the passages, then each paragraph's

    def __post_init__(self) -> None:
        self._stops = StopMatcher(self.call.stops)
        self._unsent = 0  # logprobs not yet sent in a chunk

    def take(self, event: Event) -> dict[str, Any] | None:
        match event:
            case TokenLogprobs(tokens=tokens):
                self.logprobs.extend(tokens)
            case Sources():
                self.sources = event
            case PromptLogprobs(tokens=tokens):
                self.prompt_logprobs = tokens  # sent with the echoed prompt (text_completions)
            case ThinkingDelta(text=text):
                self.reasoning.append(text)
                return {"reasoning_content": text}
            case ContentDelta(text=text):
                return self._content(self._stops.feed(text))
            case StructuredValue(value=value):
                return self._content(json.dumps(value, ensure_ascii=False))
            case ToolCall():
                self.calls.append(event)
                return {"tool_calls": [_call_json(event, len(self.calls) - 1)]}
            case TurnDone(stats=stats):
                self.stats, self.finished = stats, True
                return self._content(self._stops.flush())
            case TurnError():
                self.stats, self.error, self.finished = event.stats, event, True
            case _:
                pass  # recovery, retries, notices, progress: nothing a client shows
        return None

    def _content(self, text: str) -> dict[str, Any] | None:
        if self._stops.hit:
            self.cancel.cancel()  # the stop sequence ends the generation too
        if not text:
            return None
        self.content.append(text)
        return {"content": text}

    @property
    def finish_reason(self) -> str:
        if any(c.partial is not None for c in self.calls):
            return "length"
        if self.calls:
            return "tool_calls"
        if self._stops.hit:
            return "stop"
        return "length" if self.stats.finish_reason == "length" else "stop"

    def logprobs_json(self, *, unsent: bool = False) -> dict[str, Any] | None:
        """OpenAI's `logprobs` of the choice (None when not asked); `unsent`: only those no chunk carried yet."""
        if self.call.logprobs is None:
            return None
        start = self._unsent if unsent else 0
        self._unsent = len(self.logprobs) if unsent else self._unsent
        return {"content": [logprob_json(t) for t in self.logprobs[start:]], "refusal": None}

    def message(self) -> dict[str, Any]:
        text = "".join(self.content)
        out: dict[str, Any] = {"role": "assistant", "content": None if self.calls and not text.strip() else text}
        if not self.calls and out["content"] is None:
            out["content"] = ""
        if self.reasoning:
            out["reasoning_content"] = "".join(self.reasoning)
        if self.calls:
            out["tool_calls"] = [_call_json(c) for c in self.calls]
        return out


def _with_extension(choice: dict[str, Any], reply: Reply | None) -> dict[str, Any]:
    """The choice with its `ember` object when it was answered from a collection (`desktop.serve.documents`)."""
    ember = extension(reply.sources) if reply is not None else None
    if ember is not None:
        choice["ember"] = ember
    return choice


def _call_json(call: ToolCall, index: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": _arguments(call)},
    }
    return out if index is None else {"index": index, **out}


def _arguments(call: ToolCall) -> str:
    """The arguments as JSON text; a call cut by max_tokens gives the text written so far, as OpenAI does."""
    return call.partial if call.partial is not None else json.dumps(call.arguments, ensure_ascii=False)


def logprob_json(entry: TokenLogprob) -> dict[str, Any]:
    """One token's entry in OpenAI's shape (alternatives under `top_logprobs`, best first)."""
    return {
        "token": entry.token,
        "logprob": entry.logprob,
        "bytes": list(entry.bytes),
        "top_logprobs": [{"token": t.token, "logprob": t.logprob, "bytes": list(t.bytes)} for t in entry.top],
    }


def usage_of(replies: list[Reply]) -> dict[str, Any]:
    """The request's tokens: the prompt once (every choice reads the same prompt; OpenAI counts it
    once for `n` > 1), every choice's completion."""
    prompt = replies[0].stats if replies else TurnStats()
    completion = sum(reply.stats.tokens for reply in replies)
    return {
        "prompt_tokens": prompt.prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": prompt.prompt_tokens + completion,
        "prompt_tokens_details": {"cached_tokens": prompt.cached_tokens},
    }


class Shape(Protocol):
    """How one completion's response and chunks look (chat or text completions)."""

    def completion(self, replies: list[Reply]) -> dict[str, Any]: ...
    def opening(self, reply: Reply) -> dict[str, Any] | None: ...
    def chunk(self, reply: Reply, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]: ...
    def usage_chunk(self, replies: list[Reply]) -> dict[str, Any]: ...


def head(kind: str, id: str, created: int, model: str) -> dict[str, Any]:
    """What every response and chunk of one completion starts with."""
    return {"id": id, "object": kind, "created": created, "model": model}


@dataclass(frozen=True, slots=True)
class Envelope:
    """What every response and chunk of one completion shares."""

    model: str
    id: str = field(default_factory=lambda: f"chatcmpl-{uuid.uuid4().hex[:24]}")
    created: int = field(default_factory=lambda: int(time.time()))

    def completion(self, replies: list[Reply]) -> dict[str, Any]:
        return {
            **head("chat.completion", self.id, self.created, self.model),
            "choices": [
                _with_extension(
                    {
                        "index": r.index,
                        "message": r.message(),
                        "finish_reason": r.finish_reason,
                        "logprobs": r.logprobs_json(),
                    },
                    r,
                )
                for r in replies
            ],
            "usage": usage_of(replies),
        }

    def opening(self, reply: Reply) -> dict[str, Any] | None:
        return self.chunk(reply, {"role": "assistant", "content": ""})

    def chunk(self, reply: Reply, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {
            **head("chat.completion.chunk", self.id, self.created, self.model),
            "choices": [
                _with_extension(
                    {
                        "index": reply.index,
                        "delta": delta,
                        "finish_reason": finish_reason,
                        "logprobs": reply.logprobs_json(unsent=True),
                    },
                    reply if finish_reason is not None else None,
                )
            ],
        }

    def usage_chunk(self, replies: list[Reply]) -> dict[str, Any]:
        return {
            **head("chat.completion.chunk", self.id, self.created, self.model),
            "choices": [],
            "usage": usage_of(replies),
        }
