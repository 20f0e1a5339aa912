"""Search at scale: common words left out of BM25, ranking cut off in SQLite, vectors as one matrix."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from engine.docs.bm25 import Keywords
from engine.docs.chunk import Chunk
from engine.docs.index import Collection, DocIndex
from engine.docs.vectors import Matrix
from tests.bench.docs_corpus import ZipfVocabulary


def _add(
    index: DocIndex,
    coll: Collection,
    path: str,
    texts: Sequence[str],
    vectors: np.ndarray | None = None,
    *,
    ready: bool = True,
) -> None:
    file_id = index.begin_file(coll, path, "h", 0, 0)
    index.add_chunks(file_id, [Chunk(t, None, i * 100, i * 100 + len(t)) for i, t in enumerate(texts)], vectors)
    if ready:
        index.finish_file(file_id, pages=0, chunks=len(texts))


def _keywords(index: DocIndex, floor: int) -> Keywords:
    return Keywords(index.conn, floor=floor)


def test_a_common_word_is_left_out_when_the_question_has_selective_ones() -> None:
    with DocIndex.memory() as index:
        coll = index.create_collection("c")
        _add(index, coll, "/a.md", [f"river passage {i}" for i in range(40)] + ["river walnut harbor"])
        words = _keywords(index, floor=2)
        # "river" is in all 41 passages, "walnut" in one, "zebra" in none.
        assert words.queries(1, "Where is the river walnut zebra?", coll.id) == ['"walnut"']
        # only common words: all of them
        assert words.queries(1, "the river passage", coll.id) == ['"river" AND "passage"']
        assert words.queries(1, "zebra", coll.id) == []
        # A small collection keeps every word (the default floor: 2,000 passages), rarest first:
        # the passages with both words, then those with either.
        both, either = '"walnut" AND "river"', '"walnut" OR "river"'
        assert Keywords(index.conn).queries(1, "river walnut", coll.id) == [both, either]
        # Past the budget, the commonest selective words are ranked only among passages holding every word.
        budgeted = Keywords(index.conn, budget=30)
        assert budgeted.queries(1, "river walnut", coll.id) == ['"walnut" AND "river"', '"walnut"']


def test_counts_are_remembered_until_the_database_changes() -> None:
    with DocIndex.memory() as index:
        coll = index.create_collection("c")
        _add(index, coll, "/a.md", ["walnut"] * 3 + ["other"] * 30)
        words = _keywords(index, floor=2)
        version = index._version()  # pyright: ignore[reportPrivateUsage]
        assert words.queries(version, "walnut other", coll.id) == ['"walnut"']
        _add(index, coll, "/b.md", ["walnut"] * 60 + ["filler"] * 300)  # 393 passages: walnut 63, other 30
        assert index._version() != version  # pyright: ignore[reportPrivateUsage]
        assert words.queries(index._version(), "walnut other", coll.id) == ['"other"']  # pyright: ignore[reportPrivateUsage]


def test_the_best_passages_come_back_even_behind_another_collections() -> None:
    # The other collection's 200 passages rank above ours; the ranking is read further down for ours.
    with DocIndex.memory() as index:
        other, ours = index.create_collection("other"), index.create_collection("ours")
        _add(index, other, "/other.md", ["walnut walnut walnut"] * 200)
        _add(index, ours, "/ours.md", [f"walnut and {w}" for w in ("harbor", "candle", "meadow")])
        _add(index, ours, "/half.md", ["walnut walnut"], ready=False)  # still indexing: never served
        hits = index.search(ours, "walnut", k=8)
        assert sorted(h.text for h in hits) == ["walnut and candle", "walnut and harbor", "walnut and meadow"]


def test_bm25_ranking_matches_sqlite_ranking_everything() -> None:
    rng = random.Random(2)
    vocabulary = ZipfVocabulary.build(size=3000)
    texts = [vocabulary.passage(rng, 60) for _ in range(600)]
    with DocIndex.memory() as index:
        coll = index.create_collection("c")
        _add(index, coll, "/z.md", texts)
        question = vocabulary.question(rng, texts[17])
        words = _keywords(index, floor=2_000)  # nothing left out: compare with the full ranking
        version = index._version()  # pyright: ignore[reportPrivateUsage]
        every, some = words.queries(version, question, coll.id)
        t = f"fts_{coll.id}"
        full = {
            match: [
                r[0]
                for r in index.conn.execute(
                    f"SELECT rowid FROM {t} WHERE {t} MATCH ? ORDER BY bm25({t}), rowid", (match,)
                )
            ]
            for match in (every, some)
        }
        expected = list(dict.fromkeys(full[every] + full[some]))[:10]  # all the words first, then any
        assert words.ranked(version, coll.id, question, 10) == expected
        assert any(h.text == texts[17] for h in index.search(coll, question, k=8))


def test_nearest_rows_are_the_exact_top_k() -> None:
    rows = np.random.default_rng(1).standard_normal((500, 16)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    matrix = Matrix.load(1, ((1000 + i, rows[i].tobytes()) for i in range(500)))
    query = rows[42] + 0.1
    expected = [1000 + int(i) for i in np.argsort(-(rows @ query))[:20]]
    assert matrix.nearest(query, 20) == expected
    assert matrix.nearest(query, 1000) == [1000 + int(i) for i in np.argsort(-(rows @ query))]
    assert matrix.rows.flags.c_contiguous and matrix.rows.dtype == np.float32
    assert matrix.nearest(np.ones(8, dtype=np.float32), 5) == []  # another model's width: no vector ranking


def test_a_vector_of_another_width_is_skipped_not_fatal() -> None:
    good = np.ones(4, dtype=np.float32).tobytes()
    matrix = Matrix.load(1, [(1, good), (2, np.ones(3, dtype=np.float32).tobytes()), (3, good)])
    assert matrix.ids.tolist() == [1, 3] and matrix.rows.shape == (2, 4)
    assert Matrix.load(1, []).nearest(np.ones(4, dtype=np.float32), 3) == []


def test_hybrid_search_finds_by_meaning_what_no_word_matches(tmp_path: Path) -> None:
    vectors = np.eye(4, dtype=np.float32)
    with DocIndex.open(tmp_path / "d.sqlite3") as index:
        coll = index.create_collection("c", "synthetic")
        _add(index, coll, "/v.md", ["harbor lights", "candle wax", "meadow grass", "copper wire"], vectors)
        hits = index.search(coll, "metal conductor", k=4, query_vector=np.array([0, 0, 0.3, 1], dtype=np.float32))
        # The other two are orthogonal to the question (cosine 0): under the relevance cut-off.
        assert [h.text for h in hits] == ["copper wire", "meadow grass"]
        both = index.search(coll, "candle", k=1, query_vector=np.array([0, 1, 0, 0], dtype=np.float32))
        assert both[0].text == "candle wax"  # first in both rankings
        _add(index, coll, "/w.md", ["wire"], np.array([[0, 0, 0, 1]], dtype=np.float32))
        again = index.search(coll, "wire", k=2, query_vector=np.array([0, 0, 0, 1], dtype=np.float32))
        assert {h.text for h in again} == {"copper wire", "wire"}  # the matrix was read again after the write


def test_passages_holding_every_word_are_named_only_when_few() -> None:
    with DocIndex.memory() as index:
        coll = index.create_collection("c")
        _add(index, coll, "/a.md", ["walnut harbor", "walnut candle harbor", "walnut", "harbor"] + ["meadow"] * 20)
        words = Keywords(index.conn)
        version = index._version()  # pyright: ignore[reportPrivateUsage]
        text = dict(index.chunk_texts(coll))
        held = words.exact(version, coll.id, "Where is the walnut harbor?", 10)
        assert [text[i] for i in held] == ["walnut harbor", "walnut candle harbor"]  # best first under BM25
        assert words.exact(version, coll.id, "walnut harbor", 1) == []  # two hold both: more than asked for
        assert words.exact(version, coll.id, "walnut zebra", 10) == []  # no passage holds "zebra"
        assert words.exact(version, coll.id, "meadow", 10) == []  # 20 hold it: it singles nothing out
        _add(index, coll, "/b.md", ["what is it"])
        assert words.exact(index._version(), coll.id, "What is it?", 10) == []  # pyright: ignore[reportPrivateUsage]


def _exact_match_corpus(index: DocIndex) -> Collection:
    """One passage holds both of the question's words and is far from its vector; the others hold
    one word and sit close to it (the embedder knows nothing of an identifier)."""
    coll = index.create_collection("c", "synthetic")
    texts = ["the REG_ENHANCED flag is passed to regcomp", "the flag names a mode", "flag flag day", "other text"]
    vectors = np.array([[0.1, 1, 0, 0], [1, 0, 0, 0], [0.9, 0.1, 0, 0], [0, 0, 1, 0]], dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    _add(index, coll, "/a.md", texts, vectors)
    return coll


def test_a_passage_holding_every_word_comes_first_though_the_embedder_misses_it() -> None:
    with DocIndex.memory() as index:
        coll = _exact_match_corpus(index)
        question = np.array([1, 0, 0, 0], dtype=np.float32)
        hits = index.search(coll, "REG_ENHANCED flag", k=4, query_vector=question)
        # Its cosine is 0.0995, under the relevance cut-off, and with two rankings the passages
        # found by both (BM25 2nd and 3rd, vectors 1st and 2nd) outranked it.
        assert hits[0].text == "the REG_ENHANCED flag is passed to regcomp"
        assert [h.text for h in hits[1:]] == ["the flag names a mode", "flag flag day"]
        assert hits[0].score > hits[1].score  # scores still fall down the list


def test_a_passage_holding_one_word_is_still_cut_when_unrelated() -> None:
    with DocIndex.memory() as index:
        coll = _exact_match_corpus(index)
        unrelated = np.array([0, 0, 0, 1], dtype=np.float32)  # orthogonal to every passage
        # No passage holds both "regcomp" and "mode": BM25's partial matches fall to the cut-off as before.
        assert [h.text for h in index.search(coll, "regcomp mode", k=4, query_vector=unrelated)] == []


def test_words_many_passages_hold_together_are_counted_not_ranked() -> None:
    # FTS5 ranks every match before its LIMIT: 3,000 passages holding both words must not be ranked
    # just to learn that they are too many to be exact matches.
    with DocIndex.memory() as index:
        coll = index.create_collection("c")
        _add(index, coll, "/a.md", [f"river walnut {i}" for i in range(3000)])
        statements: list[str] = []
        index.conn.set_trace_callback(statements.append)
        assert Keywords(index.conn).exact(index._version(), coll.id, "river walnut", 10) == []  # pyright: ignore[reportPrivateUsage]
        index.conn.set_trace_callback(None)
        assert statements and not [s for s in statements if "ORDER BY rank" in s]
