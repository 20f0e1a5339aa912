"""One indexer per collection (DC-37): a second one is refused in one line, and reindex repairs
the duplicate passages that two concurrent indexers of an older Ember left.

Two real processes: the first indexes a file and pauses after its first batch of passages (a
hook in its progress callback), the second `ember docs add`s the same folder meanwhile. Before the
lock, the second rewrote the file's passages and the first then added its remaining batches to the
same file: duplicates for good, which `reindex` kept ("1 unchanged").
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from doc_fixtures import filler

from engine.docs.chunk import Chunk
from engine.docs.index import DocIndex
from engine.docs.indexer import index_collection

ROOT = Path(__file__).resolve().parents[1]

# The first indexer: pauses once its first passages are written, until the test says go.
_FIRST = """
import sys, time
from pathlib import Path
from engine.docs.chunk import Chunk
from engine.docs.index import DocIndex
from engine.docs.indexer import index_collection
db, started, go = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
paused = []
def progress(p):
    if p.chunks and not paused:
        paused.append(1)
        started.touch()
        deadline = time.monotonic() + 60
        while not go.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
with DocIndex.open(db) as index:
    coll = index.collection("C")
    report = index_collection(index, coll, progress=progress)
print("first:", len(report.indexed), report.chunks)
"""


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "EMBER_HOME": str(home), "PYTHONPATH": str(ROOT)}


def _duplicates(db: Path) -> tuple[int, int]:
    """(passages recorded, passage rows) over the ready files."""
    with DocIndex.open(db) as index:
        row = index.conn.execute(
            "SELECT sum(f.chunks), (SELECT count(*) FROM chunks) FROM files f WHERE f.status = 'ready'"
        ).fetchone()
        return int(row[0] or 0), int(row[1])


@pytest.mark.slow  # starts a process
def test_a_second_indexer_on_the_same_collection_is_refused_and_leaves_no_duplicates(tmp_path: Path) -> None:
    import random

    home = tmp_path / "home"
    db = home / "data" / "docs.sqlite3"
    folder = tmp_path / "conc"
    folder.mkdir()
    (folder / "big.txt").write_text(filler(random.Random(7), 60_000))
    with DocIndex.open(db) as index:
        index.add_roots(index.create_collection("C"), [folder])
    started, go = tmp_path / "started", tmp_path / "go"
    first = subprocess.Popen(
        [sys.executable, "-c", _FIRST, str(db), str(started), str(go)],
        cwd=ROOT,
        env=_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not started.exists():
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the first indexer never started writing"
            time.sleep(0.05)
        second = subprocess.run(
            [sys.executable, "-m", "desktop", "docs", "add", "C", str(folder)],
            cwd=ROOT,
            env=_env(home),
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        go.touch()
        out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert second.returncode == 2 and second.stderr == (
        "ember: collection C is being indexed by another Ember right now; try again when it has finished\n"
    )
    recorded, rows = _duplicates(db)
    assert recorded == rows and f"first: 1 {rows}" in out


def test_reindex_repairs_duplicates_an_older_version_left(tmp_path: Path) -> None:
    import random

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text(filler(random.Random(3), 3_000))
    (folder / "b.md").write_text(filler(random.Random(4), 500))
    db = tmp_path / "docs.sqlite3"
    with DocIndex.open(db) as index:
        coll = index.create_collection("C")
        index.add_roots(coll, [folder])
        index_collection(index, coll)
        recorded, rows = _duplicates(db)
        # What two concurrent indexers left: a.md's passages written twice, FTS5 rows and all.
        file_id = index.files(coll)[str(folder / "a.md")].id
        rows_a = index.conn.execute(
            "SELECT page, start_off, end_off, text FROM chunks WHERE file_id = ?", (file_id,)
        ).fetchall()
        index.add_chunks(file_id, [Chunk(r[3], r[0], r[1], r[2]) for r in rows_a])
        assert _duplicates(db)[1] > rows
        report = index_collection(index, coll)
        assert report.repaired == 1 and report.indexed == [str(folder / "a.md")] and report.unchanged == 1
        assert _duplicates(db) == (recorded, rows)
        hits = index.search(coll, index.chunk_texts(coll)[0][1].split()[0], k=20)
        assert len({(h.path, h.start) for h in hits}) == len(hits)  # no passage twice
