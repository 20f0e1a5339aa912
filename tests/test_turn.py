"""The turn policy over the scripted backend: one bounded recovery, then the malformed error."""

from __future__ import annotations

import logging

import pytest

from engine.backends.base import make_request
from engine.backends.scripted import ScriptedBackend
from engine.cancel import CancelToken
from engine.events import ContentDelta, Event, Recovery, ThinkingDelta, TurnDone, TurnError
from engine.turns.runner import CORRECTION_LINE, NO_TOOLS_LINE, TurnRunner

MALFORMED = "The model returned a malformed reply — please try again."
SCAFFOLD = ["<|tool_call_start|>", "[read(path='/homelab/backup-notes.md')]", "<|tool_call_end|>"]
SCAFFOLD_SPECIAL = [
    {"text": "<|tool_call_start|>", "special": True},
    "[read(path='/homelab/backup-notes.md')]",
    {"text": "<|tool_call_end|>", "special": True},
]


def _turn(backend: ScriptedBackend, tools: list[dict[str, object]] | None = None) -> list[Event]:
    request = make_request(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Where are my notes?"}],
        tools=tuple(tools) if tools else None,
    )
    return list(TurnRunner(backend).run(request))


def _content(events: list[Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, ContentDelta))


@pytest.mark.parametrize("scaffold", [SCAFFOLD, SCAFFOLD_SPECIAL], ids=["spelled", "special-tokens"])
def test_scaffolding_only_then_a_clean_reply_recovers_once(scaffold: list[object]) -> None:
    backend = ScriptedBackend.from_texts(scaffold, "Your notes are in /homelab.")
    # "read" is not among the offered tools: its markup is scaffolding, stripped, not a call.
    events = _turn(backend, tools=[{"type": "function", "function": {"name": "search"}}])
    assert [type(e) for e in events].count(Recovery) == 1
    assert _content(events) == "Your notes are in /homelab."
    assert isinstance(events[-1], TurnDone)
    assert events[-1].stats.attempts == 2 and events[-1].stats.scaffold_stripped > 0
    first, retry = backend.requests
    assert first.tools is not None and retry.tools is None
    system = [m for m in retry.messages if m["role"] == "system"]
    assert len(system) == 1 and CORRECTION_LINE in system[0]["content"]
    assert system[0]["content"].startswith("Be brief.")
    assert CORRECTION_LINE not in first.messages[0]["content"]


def test_scaffolding_twice_ends_in_the_malformed_error() -> None:
    backend = ScriptedBackend.from_texts(SCAFFOLD, SCAFFOLD_SPECIAL)
    events = _turn(backend)
    assert not any(isinstance(e, (ContentDelta, TurnDone)) for e in events)
    assert [type(e) for e in events] == [Recovery, TurnError]
    error = events[-1]
    assert isinstance(error, TurnError)
    assert (error.kind, error.message) == ("malformed_reply", MALFORMED)
    assert len(backend.requests) == 2  # never a third request


def test_whitespace_only_content_counts_as_empty() -> None:
    backend = ScriptedBackend.from_texts(["  \n", *SCAFFOLD, "\n"], "ok")
    events = _turn(backend)
    assert [type(e) for e in events].count(Recovery) == 1 and _content(events).strip() == "ok"


def test_scaffolding_plus_real_content_needs_no_recovery() -> None:
    backend = ScriptedBackend.from_texts(["Here you go. ", *SCAFFOLD, " Done."])
    events = _turn(backend)
    assert not any(isinstance(e, Recovery) for e in events)
    assert _content(events) == "Here you go.  Done."
    assert len(backend.requests) == 1


def test_thinking_stays_raw_and_is_not_visible_content() -> None:
    thinking = "<think>I could call <|tool_call_start|>[read()]<|tool_call_end|> maybe</think>"
    backend = ScriptedBackend.from_texts([thinking, "Answer."])
    events = _turn(backend)
    raw = "".join(e.text for e in events if isinstance(e, ThinkingDelta))
    assert raw == "I could call <|tool_call_start|>[read()]<|tool_call_end|> maybe"
    assert _content(events) == "Answer."


def test_thinking_alone_is_an_empty_reply() -> None:
    backend = ScriptedBackend.from_texts("<think>hmm</think>", "Fine.")
    events = _turn(backend)
    assert any(isinstance(e, Recovery) for e in events) and _content(events) == "Fine."


def test_no_tools_means_the_plain_text_line_is_in_the_system_prompt() -> None:
    backend = ScriptedBackend.from_texts("hi")
    _turn(backend)
    assert NO_TOOLS_LINE in backend.requests[0].messages[0]["content"]
    backend = ScriptedBackend.from_texts("hi")
    _turn(backend, tools=[{"type": "function", "function": {"name": "read"}}])
    assert NO_TOOLS_LINE not in backend.requests[0].messages[0]["content"]


def test_a_system_message_is_created_when_there_is_none() -> None:
    backend = ScriptedBackend.from_texts("hi")
    list(TurnRunner(backend).run(make_request([{"role": "user", "content": "x"}])))
    assert backend.requests[0].messages[0] == {"role": "system", "content": NO_TOOLS_LINE}


def test_every_turn_logs_one_line_with_the_fields(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="engine.turn")
    _turn(ScriptedBackend.from_texts("clean"))
    _turn(ScriptedBackend.from_texts(SCAFFOLD, "ok"))
    lines = [r.getMessage() for r in caplog.records if r.name == "engine.turn"]
    assert len(lines) == 2
    assert lines[0].endswith("retries=0 scaffold_stripped=0")
    assert "total_ms=" in lines[1] and lines[1].split("scaffold_stripped=")[1] != "0"


def test_a_backend_failure_keeps_the_partial_answer() -> None:
    backend = ScriptedBackend.from_texts("partial")
    events = _turn(backend)
    assert _content(events) == "partial"
    events = _turn(backend)  # the script is exhausted now
    assert isinstance(events[-1], TurnError) and events[-1].kind == "script"


def test_a_stopped_turn_is_done_with_the_cancelled_reason() -> None:
    backend = ScriptedBackend.from_texts([f"w{i} " for i in range(50)])
    cancel = CancelToken()
    events: list[Event] = []
    for event in TurnRunner(backend).run(make_request([{"role": "user", "content": "x"}]), cancel):
        events.append(event)
        if len(events) == 3:
            cancel.cancel()
    assert isinstance(events[-1], TurnDone) and events[-1].stats.finish_reason == "cancelled"
    assert not any(isinstance(e, Recovery) for e in events)
    assert len(backend.requests) == 1


def test_a_question_with_a_picture_keeps_thinking_apart_and_recovers_with_the_picture() -> None:
    """Images take the same turn: thinking in its pane, scaffolding stripped, and the one
    recovery request still carries the picture (the model is asked again about the same image)."""
    from engine.backends.image_input import ImageData
    from tests.projector_fixture import png

    picture = ImageData(png(6, 4), "screenshot.png")
    backend = ScriptedBackend.from_texts(["<think>", "a small image", "</think>", *SCAFFOLD], "A tiny picture.")
    question = {"role": "user", "content": "What is this?", "images": [picture]}
    events = list(TurnRunner(backend).run(make_request([question])))
    assert "".join(e.text for e in events if isinstance(e, ThinkingDelta)) == "a small image"
    assert _content(events) == "A tiny picture." and [type(e) for e in events].count(Recovery) == 1
    assert isinstance(events[-1], TurnDone)
    for sent in backend.requests:  # the first request and the recovery
        assert [m.get("images") for m in sent.messages if m["role"] == "user"] == [[picture]]
