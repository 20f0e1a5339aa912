"""Tool calls through an OpenAI-compatible server: structured deltas in, approved calls out."""

from __future__ import annotations

import json

from sse_stub import DONE, Reply, StubServer, chunk, sse

from engine.backends.base import make_request
from engine.backends.openai import OpenAIBackend
from engine.events import ToolCall, ToolResult
from engine.tools.builtin import calculator_tool
from engine.tools.permissions import Decision, ToolUse
from engine.tools.registry import ToolSet
from engine.turns.runner import TurnRunner


def call_delta(index: int, *, name: str | None = None, arguments: str = "", call_id: str | None = None) -> bytes:
    function: dict[str, str] = {"arguments": arguments}
    if name is not None:
        function["name"] = name
    fragment: dict[str, object] = {"index": index, "function": function}
    if call_id is not None:
        fragment |= {"id": call_id, "type": "function"}
    return sse({"choices": [{"index": 0, "delta": {"tool_calls": [fragment]}, "finish_reason": None}]})


def test_structured_calls_run_and_results_go_back_as_tool_messages(stubs: list[StubServer]) -> None:
    first = Reply([call_delta(0, name="calculator", call_id="x1"), call_delta(0, arguments='{"expres'),
                   call_delta(0, arguments='sion": "6*7"}'), chunk(finish="tool_calls"), DONE])
    stub = StubServer([first, Reply([chunk("It is 42."), chunk(finish="stop"), DONE])]).start()
    stubs.append(stub)
    runner = TurnRunner(OpenAIBackend(stub.url), ToolUse(ToolSet([calculator_tool()]), lambda _c: Decision.APPROVE))
    events = list(runner.run(make_request([{"role": "user", "content": "6*7?"}])))

    (call,) = [e for e in events if isinstance(e, ToolCall)]
    assert (call.name, call.arguments) == ("calculator", {"expression": "6*7"})
    assert [e.content for e in events if isinstance(e, ToolResult)] == ["42"]
    first_body, second_body = (r.body for r in stub.requests)
    assert first_body["tools"][0]["function"]["name"] == "calculator"
    assistant, tool = second_body["messages"][-2:]
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"expression": "6*7"}
    assert tool["role"] == "tool" and tool["content"] == "42" and tool["tool_call_id"] == call.id


def test_without_tools_offered_structured_calls_are_still_dropped(stubs: list[StubServer]) -> None:
    from engine.backends.base import CancelToken, StreamInfo

    stub = StubServer([Reply([chunk("a"), call_delta(0, name="f", arguments="{}"), DONE])]).start()
    stubs.append(stub)
    pieces = list(OpenAIBackend(stub.url).stream(make_request([{"role": "user", "content": "x"}]), CancelToken(),
                                                 StreamInfo()))
    assert [p.text for p in pieces] == ["a"]
