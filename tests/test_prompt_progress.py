"""Prompt evaluation reports its progress as events, and a stop while reading ends within one batch.

Real SmolLM2, with its prompt read in batches of 16 tokens (the app's are 512: the same
loop, at a fraction of the cost on a shared machine), on a prompt of about 80 tokens.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator

import pytest

from desktop.cli.cmd_chat import _print_turn  # pyright: ignore[reportPrivateUsage]
from desktop.cli.main import build_parser
from engine.backends.base import PlainBackend, Request, Sampling, StreamInfo, make_request
from engine.cancel import CancelToken
from engine.events import ContentDelta, Event, Piece, PromptProgress, TurnDone, event_to_json
from engine.llama.llama import LlamaBackend
from engine.turns.runner import TurnRunner

LONG = " ".join(f"fact {i}: the river passes the mill." for i in range(6)) + " Which river is it?"
BATCH = 16


@pytest.fixture
def reader(smollm: LlamaBackend, monkeypatch: pytest.MonkeyPatch) -> LlamaBackend:
    """The shared SmolLM2, reading prompts in small batches, its cache empty."""
    monkeypatch.setattr(smollm._kv, "n_batch", BATCH)  # below the allocated batch: always safe
    smollm.reset_cache()
    return smollm


def _request(text: str = LONG, max_tokens: int = 2) -> Request:
    return make_request([{"role": "user", "content": text}], sampling=Sampling.greedy(), max_tokens=max_tokens)


@pytest.mark.slow
def test_a_long_prompt_reports_progress_between_batches_before_the_first_token(reader: LlamaBackend) -> None:
    events = list(TurnRunner(reader).run(_request()))
    progress = list(itertools.takewhile(lambda e: isinstance(e, PromptProgress), events))
    total = reader.last_prompt_evaluated
    assert total > 3 * BATCH
    # Before the first batch and after each but the last, all before anything else of the turn.
    assert progress == [PromptProgress(done, total) for done in range(0, total, BATCH)]
    assert event_to_json(progress[1]) == {"type": "progress", "done": BATCH, "total": total}


@pytest.mark.slow
def test_a_prompt_within_one_batch_reports_nothing(smollm: LlamaBackend) -> None:
    smollm.reset_cache()  # its batches are the app's 512 tokens
    events = list(TurnRunner(smollm).run(_request("Hi!")))
    assert not any(isinstance(e, PromptProgress) for e in events)


@pytest.mark.slow
def test_only_the_new_tail_counts(reader: LlamaBackend) -> None:
    list(reader.stream(_request(), CancelToken(), StreamInfo()))
    again = [
        p
        for p in reader.stream(_request(LONG + " Answer in one word."), CancelToken(), StreamInfo())
        if isinstance(p, PromptProgress)
    ]
    assert again == []  # the cached prefix is not read again: the tail fits one batch


@pytest.mark.slow
def test_a_stop_while_reading_ends_within_one_batch(reader: LlamaBackend) -> None:
    cancel, info = CancelToken(), StreamInfo()
    seen: list[Piece | PromptProgress] = []
    for item in reader.stream(_request(), cancel, info):
        seen.append(item)
        if isinstance(item, PromptProgress) and item.done > 0:
            cancel.cancel()  # the stop button, pressed after the first batch
    assert info.finish_reason == "cancelled"
    assert all(isinstance(item, PromptProgress) for item in seen)  # no token was generated
    last = seen[-1]
    assert isinstance(last, PromptProgress) and last.done == BATCH
    assert reader.cached_tokens == BATCH  # the second batch was never decoded


class _Reading(PlainBackend):
    """Reports prompt progress, then streams two pieces."""

    name = "reading"

    def stream(self, request: Request, cancel: CancelToken, info: StreamInfo) -> Iterator[Piece | PromptProgress]:
        yield PromptProgress(0, 1000)
        yield PromptProgress(512, 1000)
        yield Piece("Hel")
        yield Piece("lo")

    def close(self) -> None:
        pass


def test_progress_passes_through_the_turn_and_is_not_a_piece() -> None:
    events: list[Event] = list(TurnRunner(_Reading()).run(_request("x")))
    assert events[:2] == [PromptProgress(0, 1000), PromptProgress(512, 1000)]
    assert "".join(e.text for e in events if isinstance(e, ContentDelta)) == "Hello"
    done = events[-1]
    assert isinstance(done, TurnDone) and done.stats.tokens == 2


def test_ember_chat_events_prints_progress_lines(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["chat", "--events", "x"])
    assert _print_turn(TurnRunner(_Reading()).run(_request("x")), args) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[:2] == [
        {"type": "progress", "done": 0, "total": 1000},
        {"type": "progress", "done": 512, "total": 1000},
    ]
    assert [line["type"] for line in lines[2:]] == ["content", "content", "done"]


def test_plain_output_leaves_progress_out(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["chat", "x"])
    assert _print_turn(TurnRunner(_Reading()).run(_request("x")), args) == 0
    out = capsys.readouterr()
    assert out.out == "Hello\n" and out.err == ""


def test_a_script_can_report_reading_a_long_prompt() -> None:
    from engine.backends.scripted import ScriptedBackend, parse_script

    script = {"replies": [[{"progress": [0, 1600]}, {"progress": [720, 1600]}, "Read."]]}
    events: list[Event] = list(TurnRunner(ScriptedBackend(parse_script(script))).run(_request("x")))
    assert events[:2] == [PromptProgress(0, 1600), PromptProgress(720, 1600)]
    done = events[-1]
    assert isinstance(done, TurnDone) and done.stats.tokens == 1  # progress is not a token
