"""One turn streamed onto the screen: each event goes to the reply it belongs to, or to the tool cards."""

from __future__ import annotations

import logging

from desktop.core.chat_views import ReplySink, ToolOffer
from desktop.core.conversation_docs import SourcesSink
from engine.api.conversations import error_kind
from engine.api.errors import EngineError
from engine.api.session import Engine, Turn
from engine.api.values import (
    ContentDelta,
    Event,
    Notice,
    PromptProgress,
    Recovery,
    Sources,
    StructuredRetry,
    StructuredValue,
    ThinkingDelta,
    ToolCall,
    ToolDenied,
    ToolLimit,
    ToolResult,
    TurnDone,
    TurnError,
    TurnErrorKind,
    fenced_json,
)

log = logging.getLogger("desktop.controller")


async def play(turn: Turn, engine: Engine, sink: ReplySink, tools: ToolOffer) -> TurnDone | TurnError:
    """Stream `turn` into `sink`; how it ended (an engine failure is recorded as the turn's error)."""
    outcome: TurnDone | TurnError = TurnError(TurnErrorKind.BACKEND, "the reply ended without a result")
    try:
        async for event in turn.run_async(engine):
            outcome = show_event(event, sink, tools) or outcome
    except EngineError as exc:
        log.warning("turn failed: %s", exc)
        outcome = TurnError(error_kind(exc), str(exc))
        await turn.record_async(outcome)
    return outcome


def show_event(event: Event, sink: ReplySink, tools: ToolOffer) -> TurnDone | TurnError | None:
    """Show one event; return it when it ends the turn."""
    match event:
        case ThinkingDelta(text=text):
            sink.add_thinking(text)
        case ContentDelta(text=text):
            sink.add_content(text)
        case Recovery(reason=reason):
            sink.restart(reason)
        case StructuredRetry(attempt=attempt, error=error):
            sink.retrying(attempt, error)
        case Notice(text=text):
            sink.note(text)
        case PromptProgress(done=done, total=total):
            sink.progress(done, total)
        case StructuredValue(value=value):
            sink.add_content(fenced_json(value))
        case Sources(sources=sources):
            if isinstance(sink, SourcesSink):
                sink.set_sources(sources, event.answer_from())
        case ToolCall() | ToolResult() | ToolDenied() | ToolLimit():
            tools.show(event)  # the approval cards
        case TurnDone() | TurnError():
            return event
        case _:
            pass
    return None
