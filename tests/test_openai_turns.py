"""Whole turns over the remote backend: the guardrail, recovery and retries hold there too."""

from __future__ import annotations

import logging

import pytest
from sse_stub import DONE, Reply, StubServer, chunk, json_body

from engine.backends.base import make_request
from engine.backends.openai import OpenAIBackend
from engine.events import ContentDelta, Event, Recovery, ThinkingDelta, TurnDone, TurnError
from engine.turns.runner import CORRECTION_LINE, TurnRunner


def _turn(stubs: list[StubServer], *replies: Reply) -> tuple[list[Event], StubServer]:
    stub = StubServer(replies).start()
    stubs.append(stub)
    backend = OpenAIBackend(stub.url, model="m", retry_delays=(0.01,))
    events = list(TurnRunner(backend).run(make_request([{"role": "user", "content": "hi"}])))
    return events, stub


def _content(events: list[Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, ContentDelta))


def test_scaffolding_only_then_a_clean_reply_is_one_recovery(stubs: list[StubServer]) -> None:
    events, stub = _turn(
        stubs,
        Reply([chunk("<|tool_call"), chunk("_start|>[read(path='/x')]<|tool_"), chunk("call_end|>"), DONE]),
        Reply([chunk("Plain answer."), DONE]),
    )
    assert [type(e) for e in events].count(Recovery) == 1
    assert _content(events) == "Plain answer."
    assert len(stub.requests) == 2
    retry_body = stub.requests[1].body
    assert CORRECTION_LINE in retry_body["messages"][0]["content"]
    assert "tools" not in retry_body


def test_reasoning_content_goes_raw_to_thinking(stubs: list[StubServer]) -> None:
    events, _ = _turn(
        stubs,
        Reply([chunk(reasoning="I might call <tool_call>x</tool_call>"), chunk("Answer."), DONE]),
    )
    thinking = "".join(e.text for e in events if isinstance(e, ThinkingDelta))
    assert thinking == "I might call <tool_call>x</tool_call>"
    assert _content(events) == "Answer."


def test_a_503_then_success_logs_retries_1(stubs: list[StubServer], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="engine.turn")
    events, _ = _turn(
        stubs,
        Reply(json_body({"error": "warming up"}), status=503, content_type="application/json"),
        Reply([chunk("ok"), DONE]),
    )
    done = events[-1]
    assert isinstance(done, TurnDone) and done.stats.retries == 1
    line = next(r.getMessage() for r in caplog.records if r.name == "engine.turn")
    assert "retries=1 " in line


def test_a_reset_after_content_keeps_the_partial_and_ends_with_an_error(stubs: list[StubServer]) -> None:
    events, stub = _turn(stubs, Reply([chunk("Half an "), chunk("answer")], then="reset"))
    assert _content(events) == "Half an answer"
    error = events[-1]
    assert isinstance(error, TurnError) and error.kind == "backend"
    assert stub.host in error.message and "\n" not in error.message
    assert len(stub.requests) == 1
