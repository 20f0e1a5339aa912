"""Issue #50: hybrid search's fusion before and after exact matches joined it, side by side on every corpus.

    uv run --no-sync python -m tests.bench.docs_fusion [--corpus stdlib heldout ...] [--db-dir DIR] [--json OUT]

Each corpus is indexed once with the defaults (kept in `--db-dir` when given, so a second run
only asks) and every question is ranked twice on the same index, as `docs_recall` ranks it:
`before`, the two-list fusion (BM25 and vectors, reciprocal-rank fusion, the cosine cut-off),
rebuilt here by naming no exact match; `after`, the defaults, where the passages holding every
word of the question join the fusion as a third list when 1 to 10 do (`Keywords.exact`).
Reported per corpus and fusion: keyword recall@1 and paraphrase recall@1/@5 and MRR, the
questions whose rank changed, and how often the exact-match list was there (`exact_fired`)
and led with the answer's file (`exact_right`). The held-out corpora whose files are absent or
changed are skipped with their problems.
"""

from __future__ import annotations

# isort: off
import engine.llama.llama_first  # noqa: F401  # pyright: ignore[reportUnusedImport]  (llama.cpp before numpy)
# isort: on

import argparse
import contextlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from engine.docs.bm25 import Keywords
from engine.docs.embed import DEFAULT_EMBEDDER, Embedder, shared_embedder
from engine.docs.index import WINDOW, Collection, DocIndex
from engine.docs.indexer import index_collection
from tests.bench.docs_recall import CORPORA, PROBLEMS
from tests.bench.docs_retrieval import ranks, scores
from tests.bench.report import dated, emit, say

Questions = Sequence[tuple[str, str]]


@contextlib.contextmanager
def two_lists() -> Iterator[None]:
    """The fusion before exact matches: no passage is ever named as holding every word."""
    saved = Keywords.exact
    Keywords.exact = lambda *_, **__: []  # pyright: ignore[reportAttributeAccessIssue]
    try:
        yield
    finally:
        Keywords.exact = saved


def _indexed(
    db: Path, folder: Path, write: Callable[[Path], object], embedder: Embedder
) -> tuple[DocIndex, Collection]:
    index = DocIndex.open(db)
    coll = index.find_collection("c")
    if coll is None or not index.info(coll).ready:
        write(folder)
        coll = index.create_collection("c", DEFAULT_EMBEDDER)
        index.add_roots(coll, [folder])
        index_collection(index, coll, embedder=embedder)
    return index, coll


def _exact_led(index: DocIndex, coll: Collection, questions: Questions) -> tuple[int, int]:
    """How many questions had exact matches, and how many of those had the answer's file hold the best."""
    stems = {
        i: Path(p).stem
        for i, p in index.conn.execute("SELECT c.id, f.path FROM chunks c JOIN files f ON f.id = c.file_id")
    }
    keywords = Keywords(index.conn)
    fired = right = 0
    for question, answer in questions:
        found = keywords.exact(0, coll.id, question, WINDOW)
        fired += bool(found)
        right += bool(found) and stems[found[0]] == answer
    return fired, right


def measure(
    name: str, db: Path, folder: Path, embedder: Embedder, questions: tuple[Questions, Questions]
) -> dict[str, Any]:
    write = CORPORA[name][0]
    index, coll = _indexed(db, folder, write, embedder)
    with index:
        out: dict[str, Any] = {"passages": index.info(coll).chunks}
        found: dict[str, list[list[int | None]]] = {}
        with two_lists():
            found["before"] = [ranks(index, coll, embedder, q) for q in questions]
        found["after"] = [ranks(index, coll, embedder, q) for q in questions]
        for fusion, (keyword, paraphrase) in found.items():
            k, p = scores(keyword), scores(paraphrase)
            out[fusion] = {
                "keyword_recall_at1": k["recall_at_1"],
                "paraphrase_recall_at1": p["recall_at_1"],
                "paraphrase_recall_at5": p["recall_at_5"],
                "paraphrase_mrr": p["mrr"],
            }
        out["changed"] = [
            {"question": q, "before": b, "after": a}
            for kind in (0, 1)
            for (q, _), b, a in zip(questions[kind], found["before"][kind], found["after"][kind], strict=True)
            if a != b
        ]
        for kind, label in ((0, "keyword"), (1, "paraphrase")):
            fired, right = _exact_led(index, coll, questions[kind])
            out[f"exact_fired_{label}"], out[f"exact_right_{label}"] = fired, right
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Issue #50: the fusion before and after exact matches, side by side")
    p.add_argument("--corpus", nargs="+", choices=sorted(CORPORA), default=["stdlib", "heldout", "debian", "heldout2"])
    p.add_argument("--db-dir", type=Path, default=None, help="keep each corpus's index here (a second run only asks)")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ember-bench-fusion-") as name:
        tmp = Path(name)
        dbs = args.db_dir or tmp
        dbs.mkdir(parents=True, exist_ok=True)
        os.environ.setdefault("EMBER_HOME", str(tmp / "home"))
        embedder = shared_embedder(DEFAULT_EMBEDDER)
        result: dict[str, Any] = dated()
        for corpus in args.corpus:
            if corpus in PROBLEMS and (missing := PROBLEMS[corpus]()):
                result[corpus] = {"skipped": missing}
                continue
            say(f"{corpus}: indexing (or reading {dbs / (corpus + '.sqlite3')}) and asking")
            _, keyword, paraphrase = CORPORA[corpus]
            folder = tmp / "corpora" / corpus
            result[corpus] = measure(corpus, dbs / f"{corpus}.sqlite3", folder, embedder, (keyword, paraphrase))
            say(json.dumps({corpus: {k: v for k, v in result[corpus].items() if k != "changed"}}))
    return emit(result, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
