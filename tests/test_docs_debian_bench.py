"""The Debian retrieval set (issue #39's "Why" measured again): well formed, and BM25 finds its keyword questions."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from engine.docs.index import DocIndex
from engine.docs.indexer import index_collection
from tests.bench.docs_debian_corpus import DOC_FILES, LICENCE_FILES, doc_stem, licence_stem, write_corpus
from tests.bench.docs_debian_questions import KEYWORD, PARAPHRASE
from tests.bench.docs_retrieval import ranks, scores

STEMS = {doc_stem(r) for r in DOC_FILES} | {licence_stem(n) for n in LICENCE_FILES}


def test_the_corpus_has_the_reviewed_shape() -> None:
    assert len(LICENCE_FILES) == 14 and len(DOC_FILES) == 48
    assert len(STEMS) == 62  # no two files share a stem, so an answer names one file


def test_the_set_has_25_of_each_kind_and_every_answer_is_in_the_corpus() -> None:
    assert len(KEYWORD) == 25 and len(PARAPHRASE) == 25
    assert {a for _, a in KEYWORD + PARAPHRASE} <= STEMS
    assert len({q for q, _ in KEYWORD + PARAPHRASE}) == 50


def _name(answer: str) -> str:
    """The answer file's program or licence: "gzip-NEWS" -> "gzip", "licence-GFDL-1.3" -> "gfdl"."""
    head = answer.removeprefix("licence-").split("-")[0].split(".")[0]
    return re.sub(r"\d+$", "", head.lower())


def test_paraphrases_do_not_name_their_program_or_licence() -> None:
    for question, answer in PARAPHRASE:
        assert not re.search(rf"\b{re.escape(_name(answer))}\b", question.lower()), question


def test_keyword_questions_name_it() -> None:
    named = [q for q, a in KEYWORD if re.search(rf"\b{re.escape(_name(a))}\b", q.lower())]
    assert len(named) >= 12, named  # about half: the rest use the document's own phrases


def test_bm25_finds_every_keyword_question_in_its_top_5(tmp_path: Path) -> None:
    files, missing = write_corpus(tmp_path / "corpus")
    if missing:
        pytest.skip(f"this machine lacks {len(missing)} of the corpus's files, e.g. {missing[0]}")
    assert len(files) == 62
    with DocIndex.open(tmp_path / "d.sqlite3") as index:
        coll = index.create_collection("debian")
        index.add_roots(coll, [tmp_path / "corpus"])
        index_collection(index, coll)
        found = ranks(index, coll, None, KEYWORD)
    assert scores(found)["recall_at_5"] == 1.0, list(zip(KEYWORD, found, strict=True))
