"""Running one reply for the controller (no Qt): a streamed chat turn or a structured (JSON) one.

Both feed the same two consumers on the event-loop thread: the `ReplySink` on screen and
the history `TurnRecorder` (None when history is off). Each returns how the turn ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from desktop.reply_format import fenced_json
from engine.backend import CancelToken, Message, Sampling
from engine.errors import (
    EngineError,
    StructuredOutputError,
)
from engine.events import ContentDelta, Event, Notice, Recovery, StructuredRetry, ThinkingDelta, TurnDone, TurnError
from engine.recorder import TurnRecorder
from engine.runtime import Engine
from engine.structured import StructuredRunner
from engine.turn import error_kind

log = logging.getLogger("desktop.controller")

FLUSH_EVERY_S = 1.0  # the recorder also throttles itself; this covers a stream that pauses
Outcome = TurnDone | TurnError


class Sink(Protocol):
    """What a run needs of the reply on screen (the controller's `ReplySink`)."""

    def add_thinking(self, text: str) -> None: ...
    def add_content(self, text: str) -> None: ...
    def restart(self, reason: str) -> None: ...


@runtime_checkable
class RetryIndicator(Protocol):
    """A reply that can show "Retrying (attempt n)…" while a structured run asks again."""

    def retrying(self, attempt: int, error: str) -> None: ...


@runtime_checkable
class NoteShower(Protocol):
    """A reply that can show a short note under itself (e.g. "decoding is not constrained")."""

    def note(self, text: str) -> None: ...


@dataclass
class RunResult:
    outcome: Outcome
    answer: str  # the visible answer (content only), for the in-memory conversation


def record(recorder: TurnRecorder | None, event: Event) -> None:
    if recorder is not None:
        recorder.on_event(event)


@contextlib.asynccontextmanager
async def flushing(recorder: TurnRecorder | None) -> AsyncIterator[None]:
    """Flush the recorder about once a second while the body runs, so a pause loses nothing."""
    task = asyncio.ensure_future(_flush_forever(recorder)) if recorder is not None else None
    try:
        yield
    finally:
        if task is not None:
            task.cancel()


async def _flush_forever(recorder: TurnRecorder) -> None:
    while True:
        await asyncio.sleep(FLUSH_EVERY_S)
        recorder.flush()


# -- a chat turn ------------------------------------------------------------------------


async def stream_chat(engine: Engine, messages: Sequence[Message], sink: Sink, recorder: TurnRecorder | None, *,
                      sampling: Sampling, max_tokens: int) -> RunResult:
    """Stream one chat turn into the sink and the recorder."""
    answer: list[str] = []
    outcome: Outcome = TurnError("backend", "the reply ended without a result")
    events = engine.chat(messages, sampling=sampling, max_tokens=max_tokens)
    # Run the stream to its end (the result is its last event) and close it on any exit,
    # so the engine's worker is never left with a half-consumed generator.
    try:
        async with flushing(recorder):
            async for event in events:
                record(recorder, event)
                outcome = _show(event, sink, answer) or outcome
    except EngineError as exc:
        log.warning("turn failed: %s", exc)
        outcome = TurnError("backend", str(exc))
        record(recorder, outcome)
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
    return RunResult(outcome, "".join(answer))


def _show(event: Event, sink: Sink, answer: list[str]) -> Outcome | None:
    match event:
        case ThinkingDelta(text=text):
            sink.add_thinking(text)
        case ContentDelta(text=text):
            answer.append(text)
            sink.add_content(text)
        case Recovery(reason=reason):
            answer.clear()  # what follows belongs to the new attempt
            sink.restart(reason)
        case TurnDone() | TurnError():
            return event
        case _:
            pass
    return None


# -- a structured turn ------------------------------------------------------------------


async def run_structured(engine: Engine, messages: Sequence[Message], schema: Mapping[str, Any], sink: Sink,
                         recorder: TurnRecorder | None, cancel: CancelToken, *, sampling: Sampling,
                         max_tokens: int) -> RunResult | None:
    """Ask for JSON matching `schema` on the engine's worker; None when it was stopped.

    The value is shown formatted in a ```json block; retries are reported as they start.
    """
    backend = engine.backend
    if backend is None:
        return RunResult(TurnError("no_model", ""), "")
    loop = asyncio.get_running_loop()

    def on_retry(event: StructuredRetry | Notice) -> None:  # on the worker thread: hop to the loop
        loop.call_soon_threadsafe(_show_retry, event, sink, recorder)

    runner = StructuredRunner(backend, on_event=on_retry, on_notice=on_retry)
    try:
        result = await engine.run_in_worker(
            lambda: runner.run(messages, schema, sampling=sampling, max_tokens=max_tokens, cancel=cancel))
    except StructuredOutputError as exc:
        if cancel.cancelled:
            return None
        return _failed(recorder, TurnError("structured_output", exc.last_error))
    except EngineError as exc:
        return _failed(recorder, TurnError(error_kind(exc), str(exc)))
    answer = fenced_json(result.value)
    sink.add_content(answer)
    record(recorder, ContentDelta(answer))
    done = TurnDone(result.stats)
    record(recorder, done)
    return RunResult(done, answer)


def _show_retry(event: StructuredRetry | Notice, sink: Sink, recorder: TurnRecorder | None) -> None:
    record(recorder, event)
    if isinstance(event, Notice):
        if isinstance(sink, NoteShower):
            sink.note(event.text)
    elif isinstance(sink, RetryIndicator):
        sink.retrying(event.attempt, event.error)


def _failed(recorder: TurnRecorder | None, error: TurnError) -> RunResult:
    log.warning("structured turn failed: %s: %s", error.kind, error.message)
    record(recorder, error)
    return RunResult(error, "")
