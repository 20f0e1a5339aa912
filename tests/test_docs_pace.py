"""Indexing says its passages/s and time left, from its own recent progress (issue #50)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from desktop.cli import cmd_docs
from engine.docs.index import DocIndex
from engine.docs.indexer import Progress, index_collection
from engine.docs.pace import Pace, duration, pace_words
from engine.docs.vectors import Vector


class Clock:
    """A clock that moves only when told to (each read can step it)."""

    def __init__(self, step: float = 0.0) -> None:
        self.now = 100.0
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


class FakeEmbedder:
    """Four numbers per text; each batch takes `clock`'s step of time (a real model's work)."""

    name = "fake"

    def __init__(self, clock: Clock, seconds: float) -> None:
        self.clock, self.seconds = clock, seconds

    def embed(self, texts: Sequence[str]) -> Vector:
        self.clock.now += self.seconds
        return np.full((len(texts), 4), 0.5, dtype=np.float32)


def test_the_rate_is_the_recent_one_and_time_left_the_bytes_still_to_read() -> None:
    clock = Clock()
    pace = Pace(clock)
    assert pace.passages_per_s() is None and pace.seconds_left() is None  # nothing yet
    for second in range(11):
        clock.now = 100.0 + second
        pace.note(passages=10 * second, done_bytes=1000 * second, total_bytes=20_000)
    assert pace.passages_per_s() == 10.0
    assert pace.seconds_left() == 10.0  # 10,000 bytes left at 1,000 a second
    for second in range(11, 60):  # slower now (a reply streams): the figure follows within the window
        clock.now = 100.0 + second
        pace.note(passages=100 + 2 * (second - 10), done_bytes=10_000 + 100 * (second - 10), total_bytes=20_000)
    assert pace.passages_per_s() == 2.0
    assert pace.seconds_left() == 51.0  # 5,100 bytes left at 100 a second


def test_no_figure_before_the_run_has_settled_nor_time_left_when_it_cannot_tell() -> None:
    clock = Clock()
    pace = Pace(clock)
    pace.note(0, 0, 1000)
    clock.now += 1
    pace.note(64, 0, 1000)
    assert pace.passages_per_s() is None  # one second in: the first batch alone says little
    clock.now += 2
    pace.note(128, 0, 1000)
    assert pace.passages_per_s() == 128 / 3
    assert pace.seconds_left() is None  # no file finished yet: no rate of bytes


def test_pace_in_words() -> None:
    assert pace_words(14.24, 250) == "14.2 passages/s · about 4 min left"
    assert pace_words(None, 12) == "about 10 s left"
    assert pace_words(1234.4, None) == "1,234 passages/s"
    assert pace_words(None, None) == ""
    assert [duration(s) for s in (1, 42, 58, 150, 3600, 3900)] == ["5 s", "40 s", "1 min", "2 min", "1 h", "1 h 5 min"]


def _folder(tmp_path: Path, files: int = 6) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    for i in range(files):
        (folder / f"n{i}.md").write_text(f"# Note {i}\n\n" + f"lantern harbour rule {i} " * 400)
    return folder


def test_the_indexers_progress_carries_the_pace(tmp_path: Path) -> None:
    clock = Clock()
    seen: list[Progress] = []
    with DocIndex.open(tmp_path / "docs.sqlite3") as index:
        coll = index.create_collection("Notes")
        index.add_roots(coll, [_folder(tmp_path)])
        embedder = FakeEmbedder(clock, 0.5)
        index_collection(index, coll, embedder=embedder, progress=lambda p: seen.append(replace(p)), clock=clock)
    last = seen[-1]
    assert last.bytes_total > 0 and last.bytes_done == last.bytes_total
    paced = [p for p in seen if p.passages_per_s is not None]
    assert paced and all(p.passages_per_s and p.passages_per_s > 0 for p in paced)
    assert any(p.seconds_left is not None and p.seconds_left > 0 for p in seen)


def test_ember_docs_add_shows_the_pace_on_a_terminal(capsys: object) -> None:
    line = cmd_docs._ProgressLine(tty=True)  # pyright: ignore[reportPrivateUsage]
    line.show(
        Progress(files_total=3, files_done=1, chunks=90, current="/d/n1.md", passages_per_s=12.0, seconds_left=70)
    )
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert "90 passages · 12.0 passages/s · about 1 min left · n1.md" in err
