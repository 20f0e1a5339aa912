"""A turn that offers tools but never runs them: the calls are the answer (an API client runs them).

    for event in OfferedToolsRunner(backend).run(request, cancel): ...

One round streams through the same guardrail as a plain turn, with a `ToolCallCollector`
limited to the offered tools as the scaffolding filter's sink: tool-call markup never reaches
the content, and a span that parses (by the model family's own parser) becomes `ToolCall`
events, yielded after the round and before `TurnDone`. Nothing is executed; the caller
sends the results back in a later request, as `tool` messages.

A round with neither calls nor visible text gets the plain turn's one recovery (no tools),
exactly like `ToolTurnRunner`; a round whose calls did not parse is such a round.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

from engine.backends.base import Backend, CancelToken, Request
from engine.errors import MalformedReplyError
from engine.events import Recovery
from engine.reply.tool_calls import ToolCallCollector
from engine.turns.rounds import fold_system, stream_round
from engine.turns.runner import CORRECTION_LINE, TurnEnd
from engine.turns.tally import Tally
from engine.turns.tool_events import AnyEvent, ToolCall

log = logging.getLogger("engine.offered_tools")


def tool_names(tools: tuple[dict[str, object], ...] | None) -> list[str]:
    """The function names of OpenAI-style tool specs (`{"type": "function", "function": {"name": …}}`)."""
    names: list[str] = []
    for spec in tools or ():
        function = spec.get("function")
        name = function.get("name") if isinstance(function, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        if isinstance(name, str):
            names.append(name)
    return names


class OfferedToolsRunner:
    """Runs one round with `request.tools` offered; parsed calls come out as `ToolCall` events."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def run(self, request: Request, cancel: CancelToken | None = None) -> Iterator[AnyEvent]:
        """Yield the turn's events; always ends with exactly one TurnDone or TurnError."""
        cancel = cancel or CancelToken()
        tally = Tally()
        end = TurnEnd("error")
        calls = 0
        try:
            for event in end.after(self._round(request, cancel, tally), tally):
                calls += isinstance(event, ToolCall)
                yield event
        finally:
            log.info("offered-tools turn outcome=%s attempts=%d tool_calls=%d", end.outcome, tally.attempts, calls)

    def _round(self, request: Request, cancel: CancelToken, tally: Tally) -> Iterator[AnyEvent]:
        collector = ToolCallCollector(tool_names(request.tools))
        pipeline, _ = yield from stream_round(self.backend, request, cancel, tally, collector)
        if cancel.cancelled:
            return
        for call in collector.calls:  # ids unique across requests: a client keys results on them
            yield ToolCall(call.call_id or f"call_{uuid.uuid4().hex[:24]}", call.name, call.arguments)
        if collector.calls or (pipeline is not None and pipeline.content.strip()):
            return
        yield Recovery("empty_reply")
        retry = request.with_(messages=fold_system(request.messages, CORRECTION_LINE), tools=None, grammar=None)
        pipeline, _ = yield from stream_round(self.backend, retry, cancel, tally)
        if (pipeline is None or not pipeline.content.strip()) and not cancel.cancelled:
            raise MalformedReplyError()
