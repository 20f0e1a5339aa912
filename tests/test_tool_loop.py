"""The tool loop over the scripted backend: approval, denial, always-allow, limits, fallbacks."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from engine.backends.base import make_request
from engine.backends.scripted import ScriptedBackend
from engine.cancel import CancelToken
from engine.events import (
    ContentDelta,
    Event,
    Recovery,
    ToolCall,
    ToolDenied,
    ToolLimit,
    ToolResult,
    TurnDone,
    TurnError,
    event_to_json,
)
from engine.tools.permissions import Decision, ToolPermissions, ToolUse, cut_result
from engine.tools.registry import Tool, ToolError, ToolSet, object_schema
from engine.turns.runner import TurnRunner


def hermes(name: str, **arguments: Any) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def echo_tools(log: list[Mapping[str, Any]] | None = None, output: str | None = None) -> ToolSet:
    def run(arguments: Mapping[str, Any]) -> str:
        if log is not None:
            log.append(arguments)
        return output if output is not None else f"echo: {arguments.get('text', '')}"

    def broken(_: Mapping[str, Any]) -> str:
        raise ToolError("the disk is on fire")

    params = object_schema({"text": {"type": "string"}})
    return ToolSet([Tool("echo", "Echo the text.", params, run), Tool("broken", "Always fails.", params, broken)])


class Approver:
    def __init__(self, *decisions: Decision) -> None:
        self.decisions = list(decisions)
        self.asked: list[ToolCall] = []

    def __call__(self, call: ToolCall) -> Decision:
        self.asked.append(call)
        return self.decisions.pop(0)


def turn(backend: ScriptedBackend, tools: ToolSet, approver: Approver, **kwargs: Any) -> list[Event]:
    runner = TurnRunner(backend, ToolUse(tools, approver, **kwargs))
    request = make_request([{"role": "user", "content": "hi"}], max_tokens=100)
    return list(runner.run(request, CancelToken()))


def content(events: list[Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, ContentDelta))


def test_an_approved_call_runs_and_its_result_goes_back_as_a_tool_message() -> None:
    calls: list[Mapping[str, Any]] = []
    backend = ScriptedBackend.from_texts(["Let me see.", hermes("echo", text="ping")], "It said ping.")
    approver = Approver(Decision.APPROVE)
    events = turn(backend, echo_tools(calls), approver)

    call = next(e for e in events if isinstance(e, ToolCall))
    assert (call.name, call.arguments) == ("echo", {"text": "ping"})
    assert approver.asked == [call]
    assert calls == [{"text": "ping"}]
    result = next(e for e in events if isinstance(e, ToolResult))
    assert (result.id, result.content) == (call.id, "echo: ping")
    assert content(events) == "Let me see.\n\nIt said ping."  # a new paragraph after the tool, not one run-on line
    assert "tool_call" not in content(events)
    assert isinstance(events[-1], TurnDone)
    # The first request offered the tools; the second carries the call and the result.
    first, second = backend.requests
    assert first.tools is not None and [t["function"]["name"] for t in first.tools] == ["echo", "broken"]
    assistant, tool = second.messages[-2:]
    assert assistant["role"] == "assistant" and assistant["content"] == "Let me see."
    assert assistant.get("tool_calls", [])[0]["function"] == {"name": "echo", "arguments": {"text": "ping"}}
    assert tool == {"role": "tool", "tool_call_id": call.id, "name": "echo", "content": "echo: ping"}


def test_text_after_a_tool_round_starts_a_new_paragraph_once() -> None:
    backend = ScriptedBackend([["Checking.", hermes("echo", text="a")], ["\n", " ", " Done", " now."]])
    events = turn(backend, echo_tools(), Approver(Decision.APPROVE))
    assert content(events) == "Checking.\n\nDone now."
    assert backend.requests[1].messages[-2]["content"] == "Checking."  # the model's own words go back as written


def test_a_call_runs_only_after_approval_and_a_denied_call_never_runs() -> None:
    calls: list[Mapping[str, Any]] = []
    backend = ScriptedBackend.from_texts(hermes("echo", text="x"), "Fine, I won't.")
    events = turn(backend, echo_tools(calls), Approver(Decision.DENY))
    assert calls == []
    call = next(e for e in events if isinstance(e, ToolCall))
    assert ToolDenied(call.id) in events
    assert not any(isinstance(e, ToolResult) for e in events)
    assert backend.requests[1].messages[-1]["content"].startswith("The user denied this tool call")
    assert content(events) == "Fine, I won't."


def test_always_allow_skips_the_question_for_that_tool_in_this_conversation_and_can_be_revoked() -> None:
    permissions = ToolPermissions()
    approver = Approver(Decision.ALWAYS)
    backend = ScriptedBackend.from_texts(hermes("echo", text="1"), hermes("echo", text="2"), "Done.")
    turn(backend, echo_tools(), approver, permissions=permissions)
    assert len(approver.asked) == 1 and permissions.allows("echo")

    # The next turn of the same conversation is not asked either; another tool still is.
    later = Approver(Decision.DENY)
    turn(
        ScriptedBackend.from_texts(hermes("echo", text="3"), hermes("broken"), "Ok."),
        echo_tools(),
        later,
        permissions=permissions,
    )
    assert [c.name for c in later.asked] == ["broken"]

    permissions.revoke("echo")
    again = Approver(Decision.DENY)
    turn(ScriptedBackend.from_texts(hermes("echo", text="4"), "Ok."), echo_tools(), again, permissions=permissions)
    assert [c.name for c in again.asked] == ["echo"]


def test_tool_rounds_stop_at_the_limit_with_a_clear_event() -> None:
    calls: list[Mapping[str, Any]] = []
    backend = ScriptedBackend.from_texts(*[hermes("echo", text=str(i)) for i in range(5)])
    events = turn(backend, echo_tools(calls), Approver(), permissions=ToolPermissions({"echo"}), max_rounds=3)
    assert len(calls) == 3  # the fourth round's call is not run
    assert len(backend.requests) == 4
    assert ToolLimit(3) in events
    assert isinstance(events[-1], TurnDone)


def test_an_oversized_result_is_cut_with_a_note_to_fit_the_context() -> None:
    big = "x" * 50_000
    backend = ScriptedBackend.from_texts(hermes("echo"), "Summarised.")
    events = turn(backend, echo_tools(output=big), Approver(Decision.APPROVE), max_result_chars=1_000)
    result = next(e for e in events if isinstance(e, ToolResult))
    assert len(result.content) <= 1_000
    assert "[result cut:" in result.content and "of 50000 characters" in result.content
    assert backend.requests[1].messages[-1]["content"] == result.content


def test_cut_result_keeps_short_results_whole() -> None:
    assert cut_result("short", 100) == "short"
    cut = cut_result("y" * 5_000, 300)
    assert len(cut) <= 300 and cut.startswith("yyy")


def test_a_failing_tool_gives_an_error_result_and_the_chat_continues() -> None:
    backend = ScriptedBackend.from_texts(hermes("broken"), "Sorry, that failed.")
    events = turn(backend, echo_tools(), Approver(Decision.APPROVE))
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.error and result.content == "error: the disk is on fire"
    assert content(events) == "Sorry, that failed."


def test_a_malformed_call_falls_back_to_the_guardrail_and_its_recovery() -> None:
    backend = ScriptedBackend.from_texts('<tool_call>{"name": "echo", "arguments": {</tool_call>', "Plain answer.")
    approver = Approver()
    events = turn(backend, echo_tools(), approver)
    assert approver.asked == []
    assert Recovery("empty_reply") in events
    assert content(events) == "Plain answer."
    assert backend.requests[1].tools is None
    done = events[-1]
    assert isinstance(done, TurnDone) and done.stats.scaffold_stripped > 0


def test_a_malformed_call_with_an_empty_recovery_ends_as_a_malformed_reply() -> None:
    backend = ScriptedBackend.from_texts("<tool_call>nonsense</tool_call>", "<tool_call>again</tool_call>")
    events = turn(backend, echo_tools(), Approver())
    assert isinstance(events[-1], TurnError) and events[-1].kind == "malformed_reply"


def test_a_grammar_constrains_only_the_first_round() -> None:
    backend = ScriptedBackend.from_texts(hermes("echo"), "Done.")
    runner = TurnRunner(backend, ToolUse(echo_tools(), Approver(Decision.APPROVE)))
    request = make_request([{"role": "user", "content": "hi"}], grammar='root ::= "x"')
    list(runner.run(request))
    assert [r.grammar for r in backend.requests] == ['root ::= "x"', None]


def test_events_have_the_documented_json_shapes() -> None:
    assert event_to_json(ToolCall("c1", "echo", {"text": "a"})) == {
        "type": "tool_call",
        "id": "c1",
        "name": "echo",
        "arguments": {"text": "a"},
    }
    assert event_to_json(ToolResult("c1", "ok")) == {"type": "tool_result", "id": "c1", "content": "ok"}
    assert event_to_json(ToolDenied("c1")) == {"type": "tool_denied", "id": "c1"}
    assert event_to_json(ContentDelta("x")) == {"type": "content", "text": "x"}


def test_a_scripted_multi_round_reply_with_special_token_pieces_plays_through() -> None:
    """The script format itself can play a tool-calling model (LFM2 markers as special pieces)."""
    script = {
        "replies": [
            [
                {"text": "<|tool_call_start|>", "special": True},
                '[echo(text="hi")]',
                {"text": "<|tool_call_end|>", "special": True},
            ],
            ["It echoed."],
        ]
    }
    from engine.backends.scripted import parse_script

    backend = ScriptedBackend(parse_script(script))
    events = turn(backend, echo_tools(), Approver(Decision.APPROVE))
    assert ToolResult("call_1", "echo: hi") in events
    assert content(events) == "It echoed."


def test_repeated_model_call_ids_stay_unique_within_a_turn() -> None:
    kimi = (
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.echo:0<|tool_call_argument_begin|>"
        '{"text": "a"}<|tool_call_end|><|tool_calls_section_end|>'
    )
    backend = ScriptedBackend.from_texts(kimi, kimi, "Done.")
    events = turn(backend, echo_tools(), Approver(), permissions=ToolPermissions({"echo"}))
    ids = [e.id for e in events if isinstance(e, ToolCall)]
    assert ids[0] == "functions.echo:0" and len(set(ids)) == 2


def test_with_no_tool_left_the_turn_is_a_plain_one() -> None:
    backend = ScriptedBackend.from_texts("Hello.")
    events = turn(backend, ToolSet(), Approver())
    assert content(events) == "Hello."
    assert backend.requests[0].tools is None
    assert "No tools are available" in backend.requests[0].messages[0]["content"]


def test_a_tool_turn_runs_through_the_engines_one_turn_api() -> None:
    import asyncio

    from engine.runtime import Engine

    backend = ScriptedBackend.from_texts(hermes("echo", text="ping"), "It said ping.")
    approver = Approver(Decision.APPROVE)

    async def main() -> tuple[list[Event], bool]:
        engine = Engine(backend)
        request = make_request([{"role": "user", "content": "hi"}], max_tokens=100)
        events = [e async for e in engine.run_turn(request, tools=ToolUse(echo_tools(), approver))]
        busy_after = engine.busy
        await engine.aclose()
        return events, busy_after

    events, busy_after = asyncio.run(main())
    assert [type(e) for e in events if isinstance(e, ToolCall | ToolResult)] == [ToolCall, ToolResult]
    assert content(events) == "It said ping." and isinstance(events[-1], TurnDone)
    assert not busy_after  # the turn was counted as running and is done
