"""Tool calls through an OpenAI-compatible server: structured deltas in, approved calls out."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
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
    first = Reply(
        [
            call_delta(0, name="calculator", call_id="x1"),
            call_delta(0, arguments='{"expres'),
            call_delta(0, arguments='sion": "6*7"}'),
            chunk(finish="tool_calls"),
            DONE,
        ]
    )
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
    pieces = list(
        OpenAIBackend(stub.url).stream(make_request([{"role": "user", "content": "x"}]), CancelToken(), StreamInfo())
    )
    assert [p.text for p in pieces] == ["a"]


def _one_call_then_done(arguments: list[str]) -> list[Reply]:
    parts = [call_delta(0, name="calculator", call_id="x1"), *(call_delta(0, arguments=a) for a in arguments)]
    return [Reply([*parts, chunk(finish="tool_calls"), DONE]), Reply([chunk("done."), chunk(finish="stop"), DONE])]


def test_arguments_nested_100000_deep_are_a_malformed_call_not_a_traceback(stubs: list[StubServer]) -> None:
    from engine.events import Recovery, TurnDone

    stub = StubServer(_one_call_then_done(["[" * 100_000 + "]" * 100_000])).start()
    stubs.append(stub)
    runner = TurnRunner(OpenAIBackend(stub.url), ToolUse(ToolSet([calculator_tool()]), lambda _c: Decision.APPROVE))
    events = list(runner.run(make_request([{"role": "user", "content": "go"}])))
    assert not [e for e in events if isinstance(e, ToolCall)]
    assert any(isinstance(e, Recovery) for e in events) and isinstance(events[-1], TurnDone)


def test_tool_call_fragments_count_against_max_tokens(stubs: list[StubServer]) -> None:
    from engine.backends.base import CancelToken, StreamInfo

    fragments = ['{"expression": "1+1", "junk": "', "B" * 1_000_000, *["B" * 500] * 2000, '"}']
    stub = StubServer(_one_call_then_done(fragments)).start()
    stubs.append(stub)
    backend = OpenAIBackend(stub.url)
    info = StreamInfo()
    request = make_request([{"role": "user", "content": "go"}], max_tokens=50).with_(tools=({"type": "function"},))
    pieces = list(backend.stream(request, CancelToken(), info))
    assert info.finish_reason == "length"
    assert sum(len(p.text) for p in pieces) <= 50 * 32 + 100  # not the 1 MB the server sent


def test_many_fragments_assemble_in_linear_time() -> None:
    import time

    from engine.backends.openai_tools import ToolCallDeltas

    def assemble(n: int) -> float:
        deltas = ToolCallDeltas()
        deltas.wanted = True
        start = time.perf_counter()
        deltas.add([{"index": 0, "function": {"name": "calculator", "arguments": '{"junk": "'}}])
        for _ in range(n):
            deltas.add([{"index": 0, "function": {"arguments": "B" * 500}}])
        deltas.add([{"index": 0, "function": {"arguments": '"}'}}])
        (piece,) = deltas.pieces()
        assert len(piece.text) > n * 500
        return time.perf_counter() - start

    small, large = assemble(2_000), assemble(20_000)
    assert large < 30 * small + 0.5  # 10x the fragments; quadratic joining would be about 100x


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
@settings(max_examples=150, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6),
        lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=4), kids, max_size=4),
        max_leaves=25,
    ),
    st.integers(1, 7),
)
def test_any_argument_shape_in_any_fragmentation_is_a_call_or_stripped(arguments: object, pieces: int) -> None:
    from engine.backends.openai_tools import ToolCallDeltas
    from engine.reply.tool_call_parsers import CallSyntaxError
    from engine.reply.tool_calls import parse_span

    text = json.dumps(arguments)
    step = max(1, len(text) // pieces)
    deltas = ToolCallDeltas()
    deltas.wanted = True
    deltas.add([{"index": 0, "function": {"name": "calculator"}}])
    for i in range(0, len(text), step):
        deltas.add([{"index": 0, "function": {"arguments": text[i : i + step]}}])
    (piece,) = deltas.pieces()
    try:
        (call,) = parse_span("hermes", piece.text)
    except CallSyntaxError:
        assert not isinstance(arguments, dict)  # only what is not an object is refused
        return
    if isinstance(arguments, dict):
        assert call.arguments == arguments
    elif isinstance(arguments, str) and arguments.strip():  # double-encoded: a JSON object in a string
        assert call.arguments == json.loads(arguments)
    else:
        assert call.arguments == {}


def test_a_stream_chunk_nested_100000_deep_is_skipped_as_malformed(stubs: list[StubServer]) -> None:
    from engine.backends.base import CancelToken, StreamInfo

    deep = b"data: " + b"[" * 100_000 + b"]" * 100_000 + b"\n\n"
    stub = StubServer([Reply([deep, chunk("fine."), chunk(finish="stop"), DONE])]).start()
    stubs.append(stub)
    pieces = list(
        OpenAIBackend(stub.url).stream(make_request([{"role": "user", "content": "x"}]), CancelToken(), StreamInfo())
    )
    assert "".join(p.text for p in pieces) == "fine."
