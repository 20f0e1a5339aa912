"""The real SmolLM2, forced by a GBNF grammar to call the clock tool, then answering freely."""

from __future__ import annotations

import datetime as dt

import pytest

from engine.backends.base import Sampling, make_request
from engine.cancel import CancelToken
from engine.events import ContentDelta, ToolCall, ToolResult, TurnDone
from engine.llama.llama import LlamaBackend
from engine.tools.builtin import builtin_tools
from engine.tools.permissions import Decision, ToolUse
from engine.tools.registry import ToolSet
from engine.turns.runner import TurnRunner

pytestmark = pytest.mark.slow

FORCED_CALL = r'root ::= "<tool_call>\n{\"name\": \"current_time\", \"arguments\": {}}\n</tool_call>"'


def test_smollm2_calls_the_clock_after_approval_and_answers_with_the_result(smollm: LlamaBackend) -> None:
    fixed = dt.datetime(2030, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    tools = ToolSet(builtin_tools(now=lambda: fixed))
    asked: list[ToolCall] = []

    def approve(call: ToolCall) -> Decision:
        asked.append(call)
        return Decision.APPROVE

    request = make_request(
        [{"role": "user", "content": "What time is it?"}],
        sampling=Sampling.greedy(),
        max_tokens=64,
        grammar=FORCED_CALL,
    )
    events = list(TurnRunner(smollm, ToolUse(tools, approve)).run(request, CancelToken()))

    calls = [e for e in events if isinstance(e, ToolCall)]
    assert [(c.name, c.arguments) for c in calls] == [("current_time", {})]
    assert asked == calls  # it ran only after the approver was asked
    results = [e for e in events if isinstance(e, ToolResult)]
    assert [r.content for r in results] == ["Wednesday 2030-01-02 03:04:05 UTC (UTC+0000)"]
    # The result went back through the template and a free answer streamed after it.
    index = events.index(results[0])
    answer = "".join(e.text for e in events[index:] if isinstance(e, ContentDelta))
    assert answer.strip()
    assert "<tool_call>" not in "".join(e.text for e in events if isinstance(e, ContentDelta))
    assert isinstance(events[-1], TurnDone)
