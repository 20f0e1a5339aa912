"""Answers that stay with their sources: the relevance cut-off and checked citations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from desktop.core.citations import link_citations, unsupported_citations
from engine.docs.context import build_context
from engine.docs.embed import DEFAULT_EMBEDDER, shared_embedder
from engine.docs.index import DocIndex
from engine.docs.indexer import index_collection
from engine.docs.sources import CollectionSource


def test_a_citation_with_no_source_is_shown_unsupported_never_as_a_link() -> None:
    html = link_citations("<p>Refunds take 14 days [1], or 30 [12].</p>", {1, 2})
    assert '<a href="cite:1">[1]</a>' in html
    assert "cite:12" not in html and "[12: no such source]" in html
    assert unsupported_citations("See [3], [1] and [3] again, and [7].", {1, 2}) == [3, 7]


@pytest.fixture
def kitchen(tmp_path: Path) -> tuple[DocIndex, CollectionSource]:
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "bread.md").write_text("# Bread\n\nKnead the dough for ten minutes, then let it rise in a warm place.\n")
    (folder / "bikes.md").write_text("# Bikes\n\nOil the chain after riding in the rain, and check the brakes.\n")
    index = DocIndex.open(tmp_path / "d.sqlite3")
    coll = index.create_collection("Kitchen", DEFAULT_EMBEDDER)
    index.add_roots(coll, [folder])
    embedder = shared_embedder(DEFAULT_EMBEDDER)
    index_collection(index, coll, embedder=embedder)
    return index, CollectionSource(index, coll, embedder)


@pytest.mark.slow  # the default embedder (a real model)
def test_no_relevant_passage_is_said_to_the_model_and_the_user(kitchen: tuple[DocIndex, CollectionSource]) -> None:
    index, source = kitchen
    with index:
        # "place" is in bread.md, so BM25 alone would hand it over; the embedder finds it unrelated.
        ctx = build_context(
            "Which team won the football world cup in a faraway place?", [source], lambda c: True, max_chars=100_000
        )
        assert ctx.passages == () and ctx.no_match == "No passage in 'Kitchen' matches this question"
        assert ctx.content.startswith("No passage in 'Kitchen' matches this question. Say that my documents")
        assert ctx.content.endswith("Question: Which team won the football world cup in a faraway place?")
        found = build_context("How long should I knead the dough?", [source], lambda c: True, max_chars=100_000)
        assert [Path(p.path).name for p in found.passages][:1] == ["bread.md"] and found.no_match == ""


def test_the_command_line_flags_a_citation_with_no_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from desktop.cli.main import main

    note = tmp_path / "note.md"
    note.write_text("The spare key is under the blue pot by the door.\n")
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"replies": [["Under the blue pot [1], see also [12]."]]}))
    assert main(["chat", "--backend", f"script:{script}", "--attach", str(note), "Where is the spare key?"]) == 0
    err = capsys.readouterr().err
    assert "[1] note.md" in err
    assert "[12] in the answer is unsupported: no source [12] was given (only [1]-[1])" in err
