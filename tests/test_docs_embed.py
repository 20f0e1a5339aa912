"""Vectors through llama.cpp (SmolLM2-135M, mean pooling, as the test embedder) and the hostile-size files."""

from __future__ import annotations

import random
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from doc_fixtures import filler

from engine.docs.embed import LlamaEmbedder
from engine.docs.index import DocIndex
from engine.docs.indexer import index_collection
from engine.docs.sources import Attachments
from tests.bench.docs_corpus import write_pdf


@pytest.fixture(scope="module")
def embedder(smollm_path: Path):  # type: ignore[no-untyped-def]
    # One thread: llama.cpp's threads spin at a barrier, and on a shared CPU (the other xdist
    # worker, other users) two threads were measured ten times slower than one (engine/llama/cpu_threads.py).
    e = LlamaEmbedder.load(smollm_path, n_threads=1)
    yield e
    e.close()


@pytest.mark.slow  # loads the real model (tests/slow_marks.py)
def test_the_embedder_reads_batches_with_the_threads_it_was_given(smollm_path: Path) -> None:
    # llama-cpp-python's own batch default is every logical CPU; embedding is all batch work.
    e = LlamaEmbedder.load(smollm_path, n_threads=1)
    try:
        params: Any = getattr(e.llama, "context_params")  # noqa: B009  (untyped llama_cpp)
        assert (params.n_threads, params.n_threads_batch) == (1, 1)
    finally:
        e.close()


def _consistent(index: DocIndex) -> None:
    """Every passage has one vector, no vector outlives its passage, and FTS agrees with the passages."""
    orphans = index.conn.execute(
        "SELECT count(*) FROM vectors v LEFT JOIN chunks c ON c.id = v.chunk_id WHERE c.id IS NULL"
    ).fetchone()[0]
    missing = index.conn.execute(
        "SELECT count(*) FROM chunks c LEFT JOIN vectors v ON v.chunk_id = c.id WHERE v.chunk_id IS NULL"
    ).fetchone()[0]
    assert (orphans, missing) == (0, 0)
    for (coll_id,) in index.conn.execute("SELECT id FROM collections").fetchall():
        index.conn.execute(f"INSERT INTO fts_{coll_id} (fts_{coll_id}) VALUES ('integrity-check')")


@pytest.mark.slow
@pytest.mark.timeout(600)  # a loaded machine; the model work itself is seconds
def test_a_passage_retrieves_itself_and_updates_stay_consistent(
    tmp_path: Path, embedder: LlamaEmbedder, smollm_path: Path
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    topics = [
        "baking sourdough bread with a starter",
        "repairing a bicycle chain and gears",
        "the orbit of Jupiter's moons",
        "tax deductions for home offices",
        "training a puppy to sit",
    ]
    for i, topic in enumerate(topics):
        (folder / f"t{i}.md").write_text(f"# {topic}\n\nThis note is about {topic}. " * 3)
    with DocIndex.open(tmp_path / "docs.sqlite3") as index:
        coll = index.create_collection("c", str(smollm_path))
        index.add_roots(coll, [folder])
        index_collection(index, coll, embedder=embedder)
        assert index.info(coll).vectors == index.info(coll).chunks == 5
        for chunk_id, text in index.chunk_texts(coll):
            hits = index.search(coll, "", 1, embedder.embed([text])[0])  # vectors alone (no words)
            assert hits[0].chunk_id == chunk_id
        _consistent(index)
        (folder / "t1.md").write_text("# Knitting\n\nCasting on stitches for a wool scarf.\n")
        (folder / "t3.md").unlink()
        index_collection(index, coll, embedder=embedder)
        _consistent(index)
        assert index.info(coll).vectors == 4
        hit = index.search(coll, "", 1, embedder.embed(["Casting on stitches for a wool scarf."])[0])[0]
        assert hit.path.endswith("t1.md")


@pytest.mark.slow
@pytest.mark.timeout(600)  # a loaded machine; the model work itself is seconds
def test_a_two_thousand_page_pdf_indexes_in_bounded_memory(tmp_path: Path) -> None:
    rng = random.Random(1)
    pdf = tmp_path / "huge.pdf"
    write_pdf(pdf, (f"Page {i + 1}. " + filler(rng, 40) for i in range(2000)))
    with DocIndex.open(tmp_path / "docs.sqlite3") as index:
        coll = index.create_collection("c")
        index.add_roots(coll, [pdf])
        tracemalloc.start()
        started = time.monotonic()
        try:
            report = index_collection(index, coll)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert report.pages == 2000 and report.chunks >= 2000
        assert time.monotonic() - started < 120
        assert peak < 16 * (1 << 20), f"peak Python allocations {peak / (1 << 20):.1f} MB"
        assert index.search(coll, "Page 1999")[0].page == 1999


def test_a_huge_attachment_is_refused_at_once_in_one_line(tmp_path: Path) -> None:
    big = tmp_path / "dump.txt"
    with big.open("wb") as f:
        f.truncate(1 << 30)  # a 1 GB file (sparse: no disk used)
    started = time.monotonic()
    attachments, problems = Attachments.load([big])
    assert time.monotonic() - started < 2 and len(attachments) == 0
    assert problems == [
        "dump.txt: too large to attach (1,024 MB); add it to a collection instead (ember docs add), "
        "which indexes it once"
    ]


@pytest.mark.slow
@pytest.mark.timeout(600)  # a loaded machine; the model work itself is seconds
def test_a_collection_with_an_embedder_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from desktop.cli.main import main

    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "bread.md").write_text("# Bread\n\nKnead the dough for ten minutes, then let it rise.\n")
    (folder / "bikes.md").write_text("# Bikes\n\nOil the chain after riding in the rain.\n")
    assert main(["docs", "add", "KB", str(folder), "--embedder", "default", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["indexed"] and not listed["failed"]
    assert main(["docs", "list", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)[0]
    assert info["vectors"] == info["passages"] == 2 and info["embedder"] == "default"
    assert main(["docs", "search", "KB", "How long should I knead dough?", "--json", "-k", "1"]) == 0
    assert Path(json.loads(capsys.readouterr().out)[0]["path"]).name == "bread.md"
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"replies": [["Oil it [1]."]]}))
    assert main(["chat", "--backend", f"script:{script}", "--events", "--docs", "KB", "chain care after rain?"]) == 0
    first = json.loads(capsys.readouterr().out.splitlines()[0])
    assert first["type"] == "sources" and Path(first["sources"][0]["path"]).name == "bikes.md"
