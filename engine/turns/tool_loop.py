"""A turn with tools: model round → approved tool calls → results back → next round.

    runner = ToolTurnRunner(backend, toolset, approver, permissions=conversation_permissions)
    for event in runner.run(request, cancel): ...

Each round streams through the same guardrail as a plain turn, with a
`ToolCallCollector` as the scaffolding filter's sink: tool-call markup never reaches the
answer, and a span that parses into calls of offered tools becomes `ToolCall` events.
Every call runs only after the approver says so (or the user chose "always allow" for
that tool in this conversation, which `ToolPermissions.revoke` undoes). Results go back
as `tool` messages through the model's own chat template. A turn runs at most
`max_rounds` rounds of tool calls; calls past that end the turn with `ToolLimit`. A round
considers at most `MAX_CALLS_PER_ROUND` calls (the rest are said in a `Notice` and a note
to the model), so one reply cannot ask for thousands of approvals.
A result that does not fit the context left is cut, with a note saying so.

A round with no calls and no visible text gets the plain turn's one recovery (no tools);
a round whose calls did not parse is such a round (the guardrail stripped them).
Grammar, if any, constrains the first round only: one forcing a call would loop forever.
"""

from __future__ import annotations

import enum
import json
import logging
from collections.abc import Callable, Generator, Iterator
from dataclasses import replace
from typing import Any

from engine.backends.base import Backend, CancelToken, Message, Request, StreamInfo
from engine.errors import MalformedReplyError
from engine.events import Notice, Recovery
from engine.reply.tool_call_parsers import ParsedCall
from engine.reply.tool_calls import ToolCallCollector
from engine.tools.registry import ToolError, ToolSet
from engine.turns.rounds import fold_system, stream_round
from engine.turns.runner import CORRECTION_LINE, NO_TOOLS_LINE, TurnEnd
from engine.turns.tally import Tally
from engine.turns.tool_events import AnyEvent, ToolCall, ToolDenied, ToolLimit, ToolResult

log = logging.getLogger("engine.tool_loop")

DEFAULT_MAX_ROUNDS = 8
MAX_CALLS_PER_ROUND = 32
LEFT_OUT_NOTE = "[{n} more tool calls in that reply were not run: at most {most} per reply]"
DEFAULT_MAX_RESULT_CHARS = 16_000
CHARS_PER_TOKEN = 3  # a cautious estimate: most tokenizers average more than this
DENIED_TEXT = "The user denied this tool call. Do not try it again; answer without it."
CUT_NOTE = "\n[result cut: {shown} of {total} characters shown, to fit the context]"


class Decision(enum.Enum):
    APPROVE = "approve"
    DENY = "deny"
    ALWAYS = "always"  # approve, and approve this tool from now on in this conversation


Approver = Callable[[ToolCall], Decision]


def permission_key(name: str, source: str = "builtin") -> str:
    """What "always allow" is keyed by: a built-in's name, else `SOURCE:NAME` (`mcp:files:read`).

    Keyed by source as well as name, so no other tool that comes to carry an allowed name (a
    server's tool when the built-in is off) inherits the user's choice.
    """
    return name if source == "builtin" else f"{source}:{name}"


class ToolPermissions:
    """The tools the user chose to always allow in one conversation (by `permission_key`); each can be revoked."""

    def __init__(self, always: set[str] | None = None) -> None:
        self.always: set[str] = set(always or ())

    def allows(self, name: str, source: str = "builtin") -> bool:
        return permission_key(name, source) in self.always

    def allow_always(self, name: str, source: str = "builtin") -> None:
        self.always.add(permission_key(name, source))

    def revoke(self, key: str) -> None:
        """Forget one `permission_key` (as listed in `always`)."""
        self.always.discard(key)


class ToolTurnRunner:
    """Runs turns that may call tools. Call `run` on the thread that owns the backend."""

    def __init__(self, backend: Backend, tools: ToolSet, approver: Approver, *,
                 permissions: ToolPermissions | None = None, max_rounds: int = DEFAULT_MAX_ROUNDS,
                 max_result_chars: int = DEFAULT_MAX_RESULT_CHARS) -> None:
        self.backend = backend
        self.tools = tools
        self.approver = approver
        self.permissions = permissions or ToolPermissions()
        self.max_rounds = max_rounds
        self.max_result_chars = max_result_chars
        self._ids = 0
        self._used: set[str] = set()

    def run(self, request: Request, cancel: CancelToken | None = None) -> Iterator[AnyEvent]:
        """Yield the turn's events; always ends with exactly one TurnDone or TurnError."""
        cancel = cancel or CancelToken()
        tally = Tally()
        self._ids = 0
        self._used = set()
        end = TurnEnd("error")
        try:
            yield from end.after(self._rounds(request, cancel, tally), tally)
        finally:
            log.info("tool turn outcome=%s attempts=%d tool_calls=%d tools_offered=%d",
                     end.outcome, tally.attempts, self._ids, len(self.tools.names))

    def _rounds(self, request: Request, cancel: CancelToken, tally: Tally) -> Generator[AnyEvent]:
        specs = self.tools.specs() or None
        if specs is None:  # every tool went away (a server that did not start): a plain turn
            request = request.with_(messages=fold_system(request.messages, NO_TOOLS_LINE))
        messages = list(request.messages)
        for round_no in range(self.max_rounds + 1):
            this = request.with_(messages=tuple(messages), tools=specs,
                                 grammar=request.grammar if round_no == 0 else None)
            collector = ToolCallCollector(self.tools.names)
            pipeline, info = yield from stream_round(self.backend, this, cancel, tally, collector)
            content = pipeline.content if pipeline is not None else ""
            if cancel.cancelled:
                return
            if not collector.calls:
                if not content.strip():
                    yield from self._recover(this, cancel, tally)
                return
            if round_no == self.max_rounds:
                log.warning("tool round limit (%d) reached; the calls were not run", self.max_rounds)
                yield ToolLimit(self.max_rounds)
                return
            calls = [self._event(call) for call in collector.calls[:MAX_CALLS_PER_ROUND]]
            left_out = len(collector.calls) - len(calls)
            if left_out:  # thousands of calls in one reply would be thousands of prompts or cards
                log.warning("a reply asked for %d tool calls; only the first %d run", len(collector.calls), len(calls))
                yield Notice(f"the model asked for {len(collector.calls):,} tool calls in one reply; "
                             f"only the first {MAX_CALLS_PER_ROUND} were considered")
            messages.append(_assistant_message(content, calls))
            budget = self._result_budget(this, info, len(calls))
            for call in calls:
                messages.append((yield from self._run_call(call, budget, cancel)))
                if cancel.cancelled:
                    return
            if left_out:
                messages[-1] = {**messages[-1], "content": f"{messages[-1]['content']}\n" + LEFT_OUT_NOTE.format(
                    n=left_out, most=MAX_CALLS_PER_ROUND)}

    def _recover(self, request: Request, cancel: CancelToken, tally: Tally) -> Generator[AnyEvent]:
        yield Recovery("empty_reply")
        retry = request.with_(messages=fold_system(request.messages, CORRECTION_LINE), tools=None, grammar=None)
        pipeline, _ = yield from stream_round(self.backend, retry, cancel, tally)
        if (pipeline is None or not pipeline.content.strip()) and not cancel.cancelled:
            raise MalformedReplyError()

    def _event(self, call: ParsedCall) -> ToolCall:
        self._ids += 1
        # A model's own ids (Kimi's `functions.NAME:0`) can repeat across rounds; ours cannot.
        call_id = call.call_id if call.call_id and call.call_id not in self._used else f"call_{self._ids}"
        self._used.add(call_id)
        return ToolCall(call_id, call.name, call.arguments)

    def _run_call(self, call: ToolCall, budget: int, cancel: CancelToken) -> Generator[AnyEvent, None, Message]:
        yield call
        approval = "always"
        tool = self.tools.get(call.name)
        source = tool.source if tool is not None else "builtin"
        if not self.permissions.allows(call.name, source):
            approval = "approved"
            decision = self.approver(call)
            if decision is Decision.DENY or cancel.cancelled:  # a stop while asking is no approval
                yield ToolDenied(call.id)
                return _tool_message(call, DENIED_TEXT)
            if decision is Decision.ALWAYS:
                self.permissions.allow_always(call.name, source)
                approval = "approved_always"
        result = replace(self._execute(call, budget), approval=approval)
        yield result
        return _tool_message(call, result.content)

    def _execute(self, call: ToolCall, budget: int) -> ToolResult:
        try:
            text = self.tools.run(call.name, call.arguments)
        except ToolError as exc:
            return ToolResult(call.id, f"error: {exc}", error=True)
        except Exception as exc:  # a broken tool must not end the chat
            log.exception("tool %s failed", call.name)
            return ToolResult(call.id, f"error: the tool failed ({type(exc).__name__}: {exc})", error=True)
        return ToolResult(call.id, cut_result(text, budget))

    def _result_budget(self, request: Request, info: StreamInfo, n_calls: int) -> int:
        """Characters each result may take: what the context has left after the reply's room."""
        budget = self.max_result_chars
        if info.context_size:
            free = info.context_size - info.prompt_tokens - info.completion_tokens - request.max_tokens
            budget = min(budget, max(0, free) * CHARS_PER_TOKEN // max(1, n_calls))
        return max(budget, 200)  # even a full context gets a line saying what happened


def cut_result(text: str, budget: int) -> str:
    """`text`, or its head plus a note when it is longer than `budget` characters."""
    if len(text) <= budget:
        return text
    note = CUT_NOTE.format(shown="{shown}", total=len(text))
    shown = max(0, budget - len(note) - 8)
    return text[:shown] + note.format(shown=shown)


def _assistant_message(content: str, calls: list[ToolCall]) -> Message:
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in calls
        ],
    }


def _tool_message(call: ToolCall, content: str) -> Message:
    return {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": content}


def arguments_text(arguments: dict[str, Any]) -> str:
    """The arguments as the user sees them on an approval prompt: full, indented JSON."""
    return json.dumps(arguments, ensure_ascii=False, indent=2, sort_keys=True)
