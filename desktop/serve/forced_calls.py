"""`tool_choice: "required"` or a named function: the answer must be tool calls.

What llama.cpp's server does, where it can: the model decodes under a grammar of its family's
call markup from the first token (`engine.turns.tool_grammar`), so it cannot answer in prose.
Where no grammar can be used (a backend without the grammar capability, a family whose
markup has no grammar here, a schema that does not convert), the turn runs freely and an
answer without a call gets one bounded retry, told plainly to call a tool. If that answer has
no call either, the request fails with a clear error (500, like any reply the model could not
produce) rather than passing prose off as a tool call. OpenAI's own API never answers
`required` without a call, so neither does Ember.

A reply cut by `max_tokens` is not a refusal: it is answered as OpenAI answers it, with
`finish_reason: "length"` and what was generated (the call so far, its arguments the text
the model wrote; or the text so far), and no retry is spent on it.

The turn's events are held until it is known to have calls: a retried attempt's text never
reaches the client (streamed requests get the answer when the calls are complete — they are
emitted after the model's round in any case).
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace

from engine.api.session import Engine, call_grammar, fold_system
from engine.api.values import (
    CancelToken,
    Event,
    FinishReason,
    Request,
    ToolCall,
    TurnDone,
    TurnError,
    TurnErrorKind,
    TurnStats,
)

RETRY_LINE = (
    "Your previous answer did not call a tool. Answer now with a tool call only, "
    "in the format described, and no other text."
)
MAX_REQUIRED_CALLS = 4  # `required` with parallel_tool_calls: one to four calls under the grammar


async def forced_calls(
    engine: Engine, request: Request, forced: str, cancel: CancelToken, *, parallel: bool = False
) -> list[Event]:
    """The events of a turn that answered with calls, or of one that did not, ending in a TurnError.

    One call under the grammar unless the client asked for `parallel_tool_calls` (llama.cpp's
    server does the same: a small model held to "one or more" keeps calling until max_tokens).
    """
    backend = engine.backend
    most = MAX_REQUIRED_CALLS if forced == "required" and parallel else 1
    grammar = await asyncio.to_thread(call_grammar, backend, request.tools or (), max_calls=most) if backend else None
    attempt = request.with_(grammar=grammar)
    spent = TurnStats()
    for retry in (False, True):
        events = [event async for event in engine.run_turn(attempt, cancel, apart=True)]
        end = events[-1] if events else None
        called = any(isinstance(e, ToolCall) for e in events)
        if called or not isinstance(end, TurnDone) or cancel.cancelled:
            return _with_stats(events, spent)
        if end.stats.finish_reason == FinishReason.LENGTH:  # cut by max_tokens, not a refusal: no retry
            return _with_stats(_cut(events, forced), spent)
        if retry:
            message = (
                f"the model answered without calling {'a tool' if forced == 'required' else forced}, "
                "though tool_choice requires it (after one retry)"
            )
            return [TurnError(TurnErrorKind.MALFORMED_REPLY, message, _sum(spent, end.stats))]
        spent = end.stats
        attempt = request.with_(messages=fold_system(request.messages, RETRY_LINE), grammar=None)
    raise AssertionError("unreachable")


def _cut(events: list[Event], forced: str) -> list[Event]:
    """A reply cut before any call: a named function still answers as that call (arguments
    empty so far), as OpenAI's does; "required" answers with the text so far."""
    if forced == "required":
        return events
    return [*events[:-1], ToolCall(f"call_{uuid.uuid4().hex[:24]}", forced, {}, partial=""), events[-1]]


def _with_stats(events: list[Event], spent: TurnStats) -> list[Event]:
    """The events, their end's usage counting a failed first attempt too."""
    end = events[-1] if events else None
    if spent == TurnStats() or not isinstance(end, (TurnDone, TurnError)):
        return events
    return [*events[:-1], replace(end, stats=_sum(spent, end.stats))]


def _sum(first: TurnStats, last: TurnStats) -> TurnStats:
    return replace(
        last,
        tokens=first.tokens + last.tokens,
        prompt_tokens=first.prompt_tokens + last.prompt_tokens,
        cached_tokens=first.cached_tokens + last.cached_tokens,
        attempts=first.attempts + last.attempts,
    )
