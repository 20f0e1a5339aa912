"""The retrieval set over the standard library's docstrings: well formed, and BM25 finds the keyword questions."""

from __future__ import annotations

import re
from pathlib import Path

from engine.docs.index import DocIndex
from engine.docs.indexer import index_collection
from tests.bench.docs_questions import KEYWORD, PARAPHRASE
from tests.bench.docs_retrieval import ranks, scores
from tests.bench.docs_stdlib import MODULES, write_corpus


def test_the_set_has_both_kinds_and_every_answer_is_in_the_corpus() -> None:
    assert len(KEYWORD) >= 20 and len(PARAPHRASE) >= 20
    assert {a for _, a in KEYWORD + PARAPHRASE} <= set(MODULES)
    assert len({q for q, _ in KEYWORD + PARAPHRASE}) == len(KEYWORD) + len(PARAPHRASE)


def test_paraphrases_do_not_name_their_module() -> None:
    for question, answer in PARAPHRASE:
        assert not re.search(rf"\b{answer}\b", question.lower()), question


def test_scores() -> None:
    assert scores([1, 2, None, 6]) == {"recall_at_1": 0.25, "recall_at_5": 0.5, "mrr": round((1 + 0.5 + 1 / 6) / 4, 3)}


def test_keyword_questions_keep_the_documents_words_and_bm25_finds_them(tmp_path: Path) -> None:
    folder = tmp_path / "stdlib"
    write_corpus(folder)
    for question, answer in KEYWORD:
        text = (folder / f"{answer}.md").read_text().lower()
        assert all(w in text for w in re.findall(r"[a-z]{5,}", question.lower())), question
    with DocIndex.open(tmp_path / "d.sqlite3") as index:
        coll = index.create_collection("stdlib")
        index.add_roots(coll, [folder])
        index_collection(index, coll)
        found = ranks(index, coll, None, KEYWORD)
    assert scores(found)["recall_at_5"] == 1.0, list(zip(KEYWORD, found, strict=True))
