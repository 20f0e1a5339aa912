"""Prompt evaluation reports its progress as events, and a stop while reading ends within one batch.

Real SmolLM2 (2,048-token context, so 512-token batches) on a prompt of about 1,300 tokens.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.backends.base import CancelToken, PlainBackend, Request, Sampling, StreamInfo, make_request
from engine.backends.llama import LlamaBackend
from engine.events import ContentDelta, Event, Piece, PromptProgress, ThinkingDelta, TurnDone, event_to_json
from engine.turns.runner import TurnRunner

ROOT = Path(__file__).resolve().parents[1]
LONG = " ".join(f"fact {i}: the river passes the mill." for i in range(120)) + " Which river is it?"


def _request(text: str = LONG, max_tokens: int = 4) -> Request:
    return make_request([{"role": "user", "content": text}], sampling=Sampling.greedy(), max_tokens=max_tokens)


@pytest.mark.slow
def test_a_long_prompt_reports_progress_between_batches_before_the_first_token(smollm: LlamaBackend) -> None:
    smollm.reset_cache()
    events = list(TurnRunner(smollm).run(_request()))
    progress = [e for e in events if isinstance(e, PromptProgress)]
    first_text = next(i for i, e in enumerate(events) if isinstance(e, ContentDelta | ThinkingDelta))
    total = smollm.last_prompt_evaluated
    assert total > 1024  # three batches at least
    assert [p.done for p in progress] == list(range(0, total, 512))  # before each batch; none after the last
    assert all(p.total == total for p in progress)
    assert all(events.index(p) < first_text for p in progress)
    done = events[-1]
    assert isinstance(done, TurnDone) and done.stats.finish_reason != "cancelled"
    assert event_to_json(progress[1]) == {"type": "progress", "done": 512, "total": total}


@pytest.mark.slow
def test_a_short_prompt_reports_nothing(smollm: LlamaBackend) -> None:
    smollm.reset_cache()
    events = list(TurnRunner(smollm).run(_request("Hi!")))
    assert not any(isinstance(e, PromptProgress) for e in events)


@pytest.mark.slow
def test_only_the_new_tail_counts(smollm: LlamaBackend) -> None:
    smollm.reset_cache()
    list(smollm.stream(_request(), CancelToken(), StreamInfo()))
    again = [p for p in smollm.stream(_request(LONG + " Answer in one word."), CancelToken(), StreamInfo())
             if isinstance(p, PromptProgress)]
    assert again == []  # the cached prefix is not read again: the tail fits one batch


@pytest.mark.slow
def test_a_stop_while_reading_ends_within_one_batch(smollm: LlamaBackend) -> None:
    smollm.reset_cache()
    cancel, info = CancelToken(), StreamInfo()
    seen: list[Piece | PromptProgress] = []
    for item in smollm.stream(_request(), cancel, info):
        seen.append(item)
        if isinstance(item, PromptProgress) and item.done > 0:
            cancel.cancel()  # the stop button, pressed after the first batch
    assert info.finish_reason == "cancelled"
    assert all(isinstance(item, PromptProgress) for item in seen)  # no token was generated
    last = seen[-1]
    assert isinstance(last, PromptProgress) and last.done == 512
    assert smollm.cached_tokens == 512  # the second batch was never decoded


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


@pytest.mark.slow
def test_ember_chat_events_prints_progress_lines(ember_home: Path) -> None:
    env = {**os.environ, "EMBER_HOME": str(ember_home)}
    result = subprocess.run([sys.executable, "-m", "desktop", "chat", "--events", "--no-history", "--temperature", "0",
                             "--max-tokens", "2", "--ctx", "2048", LONG], capture_output=True, text=True, env=env,
                            cwd=ROOT, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    progress = [line for line in lines if line["type"] == "progress"]
    assert progress and progress[0]["done"] == 0 and progress[-1]["done"] < progress[-1]["total"]
    assert lines.index(progress[-1]) < next(i for i, line in enumerate(lines) if line["type"] in ("content", "done"))
