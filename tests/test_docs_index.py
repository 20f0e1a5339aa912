"""The documents index: needles found by BM25 alone, incremental updates, resuming after a stop or a kill."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from doc_fixtures import filler, write_pdf, write_scanned_pdf, write_zip_bomb_docx

from engine.cancel import CancelToken
from engine.docs.bm25 import query_words
from engine.docs.index import DocIndex, fuse
from engine.docs.indexer import Progress, index_collection

ROOT = Path(__file__).resolve().parents[1]


def _corpus(folder: Path, files: int, needle_at: int, needle: str, seed: int = 7) -> None:
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        body = filler(rng, 400)
        if i == needle_at:
            cut = body.index("\n\n", len(body) // 2)
            body = body[:cut] + "\n\n" + needle + "\n\n" + body[cut + 2 :]
        (folder / f"note-{i:03d}.md").write_text(f"# Note {i}\n\n{body}\n")


def test_a_needle_in_two_hundred_files_is_found_by_bm25_alone(tmp_path: Path) -> None:
    needle = "The vault combination is 4417 and only Marguerite knows it."
    _corpus(tmp_path / "docs", 200, 137, needle)
    with DocIndex.open(tmp_path / "docs.sqlite3") as index:
        coll = index.create_collection("notes")
        index.add_roots(coll, [tmp_path / "docs"])
        report = index_collection(index, coll)
        assert len(report.indexed) == 200 and not report.failed
        hits = index.search(coll, "What is the vault combination?", k=5)
        assert hits[0].path.endswith("note-137.md")
        assert "4417" in hits[0].text
        again = index.search(coll, "What is the vault combination?", k=5)
        assert [h.chunk_id for h in again] == [h.chunk_id for h in hits]  # deterministic


def test_changes_are_picked_up_and_nothing_else_is_redone(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    _corpus(folder, 5, 0, "Alpha centauri fact.")
    with DocIndex.open(tmp_path / "docs.sqlite3") as index:
        coll = index.create_collection("c")
        index.add_roots(coll, [folder])
        assert len(index_collection(index, coll).indexed) == 5
        (folder / "note-001.md").write_text("# Changed\n\nThe ostrich parade starts at noon.\n")
        (folder / "note-002.md").unlink()
        (folder / "new.txt").write_text("A brand new document about zeppelins.\n")
        os.utime(folder / "note-003.md")  # touched, same content: not re-indexed
        report = index_collection(index, coll)
        assert sorted(Path(p).name for p in report.indexed) == ["new.txt", "note-001.md"]
        assert report.removed == 1 and report.unchanged == 3
        assert index.search(coll, "ostrich parade")[0].path.endswith("note-001.md")
        assert index.search(coll, "zeppelins")[0].path.endswith("new.txt")
        assert not any(h.path.endswith("note-002.md") for h in index.search(coll, "Note 2", k=20))
        # the FTS index and the passages agree after updates and deletes
        assert index.conn.execute(f"INSERT INTO fts_{coll.id} (fts_{coll.id}) VALUES ('integrity-check')") is not None


def test_unreadable_files_are_reported_once_and_the_rest_indexed(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "good.md").write_text("Good text about lighthouses.\n")
    write_scanned_pdf(folder / "scan.pdf")
    write_zip_bomb_docx(folder / "bomb.docx", inflated_mb=80)
    with DocIndex.open(tmp_path / "docs.sqlite3") as index:
        coll = index.create_collection("c")
        index.add_roots(coll, [folder])
        report = index_collection(index, coll)
        assert [Path(p).name for p in report.indexed] == ["good.md"]
        reasons = sorted(r for _, r in report.failed)
        assert reasons[0].startswith("bomb.docx: would inflate") and reasons[1].startswith("scan.pdf: has no text")
        again = index_collection(index, coll)  # failed files are not retried until they change
        assert again.indexed == [] and len(again.failed) == 2


def test_a_cancelled_index_never_serves_the_half_file_and_resumes(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    _corpus(folder, 3, 2, "Unique marker kumquat.")
    big = folder / "zz-big.md"
    big.write_text(filler(random.Random(1), 40_000) + "\n\nThe final line mentions a tangerine.\n")
    with DocIndex.open(tmp_path / "docs.sqlite3") as index:
        coll = index.create_collection("c")
        index.add_roots(coll, [folder])
        seen: list[int] = []

        stop = CancelToken()

        def progress(p: Progress) -> None:
            seen.append(p.chunks)
            # stop once the big file has written a batch or two
            if (
                "zz-big"
                in str(
                    index.conn.execute("SELECT group_concat(path) FROM files WHERE status = 'indexing'").fetchone()[0]
                )
                and index.conn.execute(
                    "SELECT count(*) FROM chunks c JOIN files f ON f.id = c.file_id WHERE f.status = 'indexing'"
                ).fetchone()[0]
                >= 64
            ):
                stop.cancel()

        report = index_collection(index, coll, progress=progress, cancel=stop)
        assert report.cancelled and len(report.indexed) == 3
        assert index.search(coll, "kumquat")  # finished files are searchable
        assert not any("zz-big" in h.path for h in index.search(coll, "mirror walnut", k=50))
        resumed = index_collection(index, coll)
        assert [Path(p).name for p in resumed.indexed] == ["zz-big.md"] and resumed.unchanged == 3
        assert index.search(coll, "tangerine")[0].path.endswith("zz-big.md")


_KILLER = """
import os, signal, sys
from pathlib import Path
import engine.llama.llama_first
from engine.docs.index import DocIndex
from engine.docs.indexer import index_collection
index = DocIndex.open(Path(sys.argv[1]))
coll = index.collection("c")
def progress(p):
    if p.chunks >= 128:
        os.kill(os.getpid(), signal.SIGKILL)
index_collection(index, coll, progress=progress)
"""


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX-only")
def test_a_killed_index_resumes_without_using_the_half_file(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("Small file about a heron.\n")
    (folder / "b.md").write_text(filler(random.Random(2), 60_000) + "\n\nLast words: pomegranate.\n")
    db = tmp_path / "docs.sqlite3"
    with DocIndex.open(db) as index:
        index.add_roots(index.create_collection("c"), [folder])
    child = subprocess.run([sys.executable, "-c", _KILLER, str(db)], cwd=ROOT, capture_output=True, timeout=120)
    assert child.returncode == -signal.SIGKILL
    with DocIndex.open(db) as index:
        coll = index.collection("c")
        statuses = {Path(f.path).name: f.status for f in index.files(coll).values()}
        assert statuses == {"a.md": "ready", "b.md": "indexing"}
        assert index.search(coll, "heron") and not index.search(coll, "mirror walnut")
        report = index_collection(index, coll)
        assert [Path(p).name for p in report.indexed] == ["b.md"] and report.unchanged == 1
        assert index.search(coll, "pomegranate")[0].path.endswith("b.md")


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
def test_a_large_file_is_indexed_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "big.txt"
    rng = random.Random(3)
    paragraph = filler(rng, 300) + "\n\n"
    with path.open("w") as f:
        for _ in range(6000):  # about 12 MB
            f.write(paragraph)
    with DocIndex.open(tmp_path / "docs.sqlite3") as index:
        coll = index.create_collection("c")
        index.add_roots(coll, [path])
        tracemalloc.start()
        try:
            report = index_collection(index, coll)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert report.indexed and report.chunks > 5000
    assert peak < 12 * (1 << 20), f"peak Python allocations {peak / (1 << 20):.1f} MB for a 12 MB file"


def test_a_pdf_collection_cites_pages(tmp_path: Path) -> None:
    pdf = write_pdf(tmp_path / "manual.pdf", ["Installation steps.", "Warranty lasts 36 months.", "Index."])
    with DocIndex.open(tmp_path / "docs.sqlite3") as index:
        coll = index.create_collection("m")
        index.add_roots(coll, [pdf])
        report = index_collection(index, coll)
        assert report.pages == 3
        hit = index.search(coll, "How long is the warranty?")[0]
        assert (hit.page, hit.start) == (2, 0) and "36 months" in hit.text


def test_query_building_and_fusion() -> None:
    assert query_words('What is "the" AND vault-code?') == ["vault", "code"]
    assert query_words("the") == ["the"]
    fused = fuse([[1, 2, 3], [3, 1]])
    assert [i for i, _ in fused] == [1, 3, 2]
