"""The rounds of a turn with tools: model round → approved tool calls → results back → next round.

    TurnRunner(backend, ToolUse(toolset, approver, permissions=conversation_permissions)).run(request)

Each round streams through the same guardrail as a plain turn, with a
`ToolCallCollector` as the scaffolding filter's sink: tool-call markup never reaches the
answer, and a span that parses into calls of offered tools becomes `ToolCall` events.
Every call runs only after the approver says so (or the user chose "always allow" for
that tool in this conversation, which `ToolPermissions.revoke` undoes). Results go back
as `tool` messages through the model's own chat template. A turn runs at most
`max_rounds` rounds of tool calls; calls past that end the turn with `ToolLimit`. At most
`MAX_CALLS_PER_ROUND` calls of one reply run (a `Notice` says so; the model is told).
A result that does not fit the context left is cut, with a note saying so.

A round with no calls and no visible text ends the rounds with no visible answer: the
runner then makes its one recovery request (engine/turns/runner.py), as for any turn.

A request whose tools are offered but not run here (`offered_round`: the local API server,
whose client runs them) gets one round; its parsed calls are the answer.
Grammar, if any, constrains the first round only: one forcing a call would loop forever.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Generator
from dataclasses import dataclass, field, replace

from engine.backends.base import Backend, Message, Request, StreamInfo
from engine.cancel import CancelToken
from engine.events import (
    Approval,
    ContentDelta,
    Event,
    FinishReason,
    Notice,
    ToolCall,
    ToolDenied,
    ToolLimit,
    ToolResult,
)
from engine.reply.tool_call_parsers import ParsedCall
from engine.reply.tool_calls import ToolCallCollector, partial_call
from engine.tools.permissions import DENIED_TEXT, Decision, ToolUse, cut_result
from engine.tools.registry import ToolError
from engine.turns.rounds import Round, stream_round
from engine.turns.tally import Tally

log = logging.getLogger("engine.turn")

CHARS_PER_TOKEN = 3  # a cautious estimate: most tokenizers average more than this
MAX_CALLS_PER_ROUND = 32
LEFT_OUT_NOTE = "[{n} more tool calls in that reply were not run: at most {most} per reply]"


@dataclass
class ToolRounds:
    """The tool rounds of one turn; `calls` counts the calls made (for the turn's log line)."""

    backend: Backend
    use: ToolUse
    calls: int = 0
    _used: set[str] = field(default_factory=set[str])

    def run(self, request: Request, cancel: CancelToken, tally: Tally) -> Generator[Event, None, tuple[bool, Request]]:
        """Stream the rounds; return whether the turn is answered (or stopped) and its last request."""
        messages = list(request.messages)
        wrote = False  # whether an earlier round showed text
        for round_no in range(self.use.max_rounds + 1):
            this = request.with_(messages=tuple(messages), grammar=request.grammar if round_no == 0 else None)
            collector = ToolCallCollector(self.use.tools.names)
            pipeline, info = yield from _apart(stream_round(self.backend, this, cancel, tally, collector), wrote)
            content = pipeline.content if pipeline is not None else ""
            wrote = wrote or bool(content.strip())
            if cancel.cancelled:
                return True, this
            if not collector.calls:
                return bool(content.strip()), this
            if round_no == self.use.max_rounds:
                log.warning("tool round limit (%d) reached; the calls were not run", self.use.max_rounds)
                yield ToolLimit(self.use.max_rounds)
                return True, this
            calls = [self._event(call) for call in collector.calls[:MAX_CALLS_PER_ROUND]]
            left_out = len(collector.calls) - len(calls)
            if left_out:  # thousands of calls in one reply would be thousands of prompts or cards
                log.warning("a reply asked for %d tool calls; only the first %d run", len(collector.calls), len(calls))
                yield Notice(
                    f"the model asked for {len(collector.calls):,} tool calls in one reply; "
                    f"only the first {MAX_CALLS_PER_ROUND} were considered"
                )
            messages.append(_assistant_message(content, calls))
            budget = self._result_budget(this, info, len(calls))
            for call in calls:
                messages.append((yield from self._run_call(call, budget, cancel)))
                if cancel.cancelled:
                    return True, this
            if left_out:
                messages[-1] = {
                    **messages[-1],
                    "content": f"{messages[-1]['content']}\n"
                    + LEFT_OUT_NOTE.format(n=left_out, most=MAX_CALLS_PER_ROUND),
                }
        return True, request  # unreachable: the last round either has no calls or hits the limit

    def _event(self, call: ParsedCall) -> ToolCall:
        self.calls += 1
        # A model's own ids (Kimi's `functions.NAME:0`) can repeat across rounds; ours cannot.
        call_id = call.call_id if call.call_id and call.call_id not in self._used else f"call_{self.calls}"
        self._used.add(call_id)
        return ToolCall(call_id, call.name, call.arguments)

    def _run_call(self, call: ToolCall, budget: int, cancel: CancelToken) -> Generator[Event, None, Message]:
        yield call
        approval = Approval.ALWAYS
        permissions = self.use.permissions
        tool = self.use.tools.get(call.name)
        source = tool.source if tool is not None else "builtin"
        if not permissions.allows(call.name, source):
            approval = Approval.APPROVED
            decision = self.use.approver(call)
            if decision is Decision.DENY or cancel.cancelled:  # a stop while asking is no approval
                yield ToolDenied(call.id)
                return _tool_message(call, DENIED_TEXT)
            if decision is Decision.ALWAYS:
                permissions.allow_always(call.name, source)
                approval = Approval.APPROVED_ALWAYS
        result = replace(self._execute(call, budget), approval=approval)
        yield result
        return _tool_message(call, result.content)

    def _execute(self, call: ToolCall, budget: int) -> ToolResult:
        try:
            text = self.use.tools.run(call.name, call.arguments)
        except ToolError as exc:
            return ToolResult(call.id, f"error: {exc}", error=True)
        except Exception as exc:  # a broken tool must not end the chat
            log.exception("tool %s failed", call.name)
            return ToolResult(call.id, f"error: the tool failed ({type(exc).__name__}: {exc})", error=True)
        return ToolResult(call.id, cut_result(text, budget))

    def _result_budget(self, request: Request, info: StreamInfo, n_calls: int) -> int:
        """Characters each result may take: what the context has left after the reply's room."""
        budget = self.use.max_result_chars
        if info.n_ctx:
            free = info.n_ctx - info.prompt_tokens - info.completion_tokens - request.max_tokens
            budget = min(budget, max(0, free) * CHARS_PER_TOKEN // max(1, n_calls))
        return max(budget, 200)  # even a full context gets a line saying what happened


def _apart(round_: Round, after_text: bool) -> Round:
    """A round's text, as a new paragraph when an earlier round showed text.

    Each round's text goes on the one answer, so "I'll use the calculator." and, after the
    result, "12 × 34 = 408." would otherwise run together on one line. Blank deltas before the
    round's first words are dropped: the paragraph break stands for them.
    """
    if not after_text:
        return (yield from round_)
    try:
        while True:
            try:
                event = next(round_)
            except StopIteration as done:
                return done.value
            if isinstance(event, ContentDelta):
                if not event.text.strip():
                    continue
                yield ContentDelta("\n\n" + event.text.lstrip())
                return (yield from round_)
            yield event
    finally:
        round_.close()  # a turn closed early (a stop, an error) still ends the model's stream


def _assistant_message(content: str, calls: list[ToolCall]) -> Message:
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls
        ],
    }


def _tool_message(call: ToolCall, content: str) -> Message:
    return {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": content}


def offered_round(
    backend: Backend, request: Request, cancel: CancelToken, tally: Tally
) -> Generator[Event, None, bool]:
    """One round offering `request.tools` without running them (an API client runs them).

    A span that parses into calls of the offered tools becomes `ToolCall` events after the
    round: the calls are the answer. Returns whether the turn is answered (calls or text).

    A round cut by its token limit is answered with what it wrote, as OpenAI does: a call
    cut off mid-way that names an offered tool becomes a partial `ToolCall`, and no
    recovery round is spent on it (the client asked for that limit).
    """
    names = tool_names(request.tools)
    collector = ToolCallCollector(names)
    pipeline, info = yield from stream_round(backend, request, cancel, tally, collector)
    for call in collector.calls:  # ids unique across requests: a client keys results on them
        yield ToolCall(call.call_id or _call_id(), call.name, call.arguments)
    if info.finish_reason != FinishReason.LENGTH:
        return bool(collector.calls) or (pipeline is not None and bool(pipeline.content.strip()))
    cut = partial_call(collector.unfinished, names) if collector.unfinished and not collector.calls else None
    if cut is not None:
        yield ToolCall(_call_id(), cut[0], {}, partial=cut[1])
    return True


def _call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def tool_names(tools: tuple[dict[str, object], ...] | None) -> list[str]:
    """The function names of OpenAI-style tool specs (`{"type": "function", "function": {"name": …}}`)."""
    names: list[str] = []
    for spec in tools or ():
        function = spec.get("function")
        name = function.get("name") if isinstance(function, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        if isinstance(name, str):
            names.append(name)
    return names
