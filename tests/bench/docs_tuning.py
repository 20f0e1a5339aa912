"""Issue #50's retrieval ideas, tried on the tuning corpus only: query normalisation, neighbours, fusion weights.

    uv run --no-sync python -m tests.bench.docs_tuning [--corpus debian|stdlib] [--db PATH] [--json OUT]

The Debian corpus (`docs_debian_corpus`, its questions `docs_debian_questions`) is indexed once with
the defaults (kept at `--db`, so a second run only asks), then every question is asked of each
variant of the search, with the ranks counted as `docs_recall` counts them (the answer file's rank
among the distinct files of the top 10 passages). The variants change only the query side of
`DocIndex.search` (the same BM25 ranking, vectors, fusion and relevance cut-off, rebuilt here):

- `embed`: the question as the embedder reads it: `raw`, `lower` (lower case, punctuation out),
  `no_question_words` (also without question and function words: how, what, does, my…);
- `bm25`: the same for the keyword query (BM25 already drops stopwords and punctuation);
- `vector_weight`: the vector ranking's weight in reciprocal-rank fusion (BM25's is 1);
  `rrf_k`: fusion's constant; `window`: how deep each ranking goes into the fusion;
- `neighbour`: a passage gains this share of the fused score of the passages beside it in its file;
- `file`: a passage gains this share of the other passages of its file found.

The held-out corpora are never opened here: they are what the chosen defaults are checked on.
"""

from __future__ import annotations

# isort: off
import engine.llama.llama_first  # noqa: F401  # pyright: ignore[reportUnusedImport]  (llama.cpp before numpy)
# isort: on

import argparse
import itertools
import json
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from engine.docs.embed import DEFAULT_EMBEDDER, Embedder, shared_embedder
from engine.docs.index import MIN_COSINE, RRF_K, WINDOW, Collection, DocIndex
from engine.docs.indexer import index_collection
from tests.bench import docs_debian_corpus, docs_debian_questions, docs_questions, docs_stdlib
from tests.bench.docs_retrieval import DEPTH, scores
from tests.bench.report import dated, emit, say

Questions = Sequence[tuple[str, str]]
CORPORA: dict[str, tuple[Callable[[Path], object], Questions, Questions]] = {
    "debian": (docs_debian_corpus.write_corpus, docs_debian_questions.KEYWORD, docs_debian_questions.PARAPHRASE),
    "stdlib": (docs_stdlib.write_corpus, docs_questions.KEYWORD, docs_questions.PARAPHRASE),
}
QUESTION_WORDS = frozenset(
    "how what when where which who whom whose why is are do does did can could should would will "
    "i my me we our you your there a an the".split()
)
VARIANTS: list[dict[str, Any]] = [
    {},
    {"embed": "lower"},
    {"embed": "no_question_words"},
    {"bm25": "no_question_words"},
    {"embed": "no_question_words", "bm25": "no_question_words"},
    *({"vector_weight": w} for w in (0.5, 0.75, 1.25, 1.5, 2.0)),
    *({"rrf_k": k} for k in (10, 30, 100)),
    *({"window": w} for w in (5, 20)),
    *({"neighbour": s} for s in (0.25, 0.5, 1.0)),
    *({"file": s} for s in (0.1, 0.25, 0.5)),
]


def normalised(question: str, mode: str) -> str:
    words = re.findall(r"\w+", question.lower())
    if mode == "lower":
        return " ".join(words)
    if mode == "no_question_words":
        return " ".join(w for w in words if w not in QUESTION_WORDS) or question
    return question


class Tuner:
    """One indexed collection, searched with each variant; query vectors embedded once per text."""

    def __init__(self, index: DocIndex, coll: Collection, embedder: Embedder) -> None:
        self.index, self.coll, self.embedder = index, coll, embedder
        self.matrix = index._matrix(coll)  # pyright: ignore[reportPrivateUsage]
        rows = index.conn.execute(
            "SELECT c.id, f.path FROM chunks c JOIN files f ON f.id = c.file_id ORDER BY f.path, c.page, c.start_off"
        ).fetchall()
        self.file_of = {int(r[0]): Path(str(r[1])).stem for r in rows}
        order = [int(r[0]) for r in rows]
        self.beside: dict[int, list[int]] = {}
        for a, b in itertools.pairwise(order):
            if self.file_of[a] == self.file_of[b]:
                self.beside.setdefault(a, []).append(b)
                self.beside.setdefault(b, []).append(a)
        self._vectors: dict[str, Any] = {}

    def _vector(self, text: str) -> Any:
        if text not in self._vectors:
            self._vectors[text] = self.embedder.embed([text])[0]
        return self._vectors[text]

    def search(self, question: str, v: dict[str, Any]) -> list[int]:
        window = max(DEPTH, int(v.get("window", WINDOW)))
        bm25 = self.index._bm25(self.coll, normalised(question, v.get("bm25", "raw")), window)  # pyright: ignore[reportPrivateUsage]
        similarity = self.matrix.scores(self._vector(normalised(question, v.get("embed", "raw"))))
        nearest = self.matrix.top(similarity, window)
        cosine = self.matrix.similarity(similarity)
        k = float(v.get("rrf_k", RRF_K))
        fused: dict[int, float] = {}
        for weight, ranking in ((1.0, bm25), (float(v.get("vector_weight", 1.0)), nearest)):
            for rank, item in enumerate(ranking, start=1):
                fused[item] = fused.get(item, 0.0) + weight / (k + rank)
        fused = self._spread(fused, float(v.get("neighbour", 0.0)), float(v.get("file", 0.0)))
        ranked = sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))
        return [i for i, _ in ranked if not cosine or cosine.get(i, 1.0) >= MIN_COSINE][:DEPTH]

    def _spread(self, fused: dict[int, float], neighbour: float, file: float) -> dict[int, float]:
        base = dict(fused)
        per_file: dict[str, float] = {}
        for item, score in base.items():
            per_file[self.file_of[item]] = per_file.get(self.file_of[item], 0.0) + score
        out: dict[int, float] = {}
        for item, score in base.items():
            near = sum(base.get(n, 0.0) for n in self.beside.get(item, []))
            out[item] = score + neighbour * near + file * (per_file[self.file_of[item]] - score)
        return out

    def ranks(self, questions: Questions, v: dict[str, Any]) -> list[int | None]:
        found: list[int | None] = []
        for question, answer in questions:
            files = list(dict.fromkeys(self.file_of[i] for i in self.search(question, v)))
            found.append(files.index(answer) + 1 if answer in files else None)
        return found


def _indexed(db: Path, write: Callable[[Path], object]) -> None:
    with DocIndex.open(db) as index:
        if index.find_collection("c") is not None:
            return
        with tempfile.TemporaryDirectory(prefix="ember-bench-tuning-") as name:
            write(Path(name) / "corpus")
            coll = index.create_collection("c", DEFAULT_EMBEDDER)
            index.add_roots(coll, [Path(name) / "corpus"])
            index_collection(index, coll, embedder=shared_embedder(DEFAULT_EMBEDDER))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Issue #50: retrieval variants on the tuning corpus")
    p.add_argument("--corpus", choices=sorted(CORPORA), default="debian")
    p.add_argument("--db", type=Path, default=None, help="the indexed corpus, kept between runs")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    write, keyword, paraphrase = CORPORA[args.corpus]
    with tempfile.TemporaryDirectory(prefix="ember-bench-tuning-") as name:
        os.environ.setdefault("EMBER_HOME", str(Path(name) / "home"))
        db = args.db or Path(name) / f"{args.corpus}.sqlite3"
        _indexed(db, write)
        embedder = shared_embedder(DEFAULT_EMBEDDER)
        rows: list[dict[str, Any]] = []
        with DocIndex.open(db) as index:
            tuner = Tuner(index, index.collection("c"), embedder)
            for variant in VARIANTS:
                k, para = scores(tuner.ranks(keyword, variant)), scores(tuner.ranks(paraphrase, variant))
                rows.append({"variant": variant or "defaults", "keyword": k, "paraphrase": para})
                say(json.dumps(rows[-1]))
    result = dated(corpus=args.corpus, variants=rows)
    return emit(result, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
