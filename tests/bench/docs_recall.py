"""Issue #50's recall and embedding speed, today's path against the defaults, side by side on five corpora.

    uv run --no-sync python -m tests.bench.docs_recall [--corpus heldout heldout2 heldout3 debian stdlib] [--json OUT]

For each corpus the collection is indexed twice in one run, and each question asked of both:

- `today`: what Ember did before issue #50, rebuilt here: passages of 1,200 characters with 200
  of overlap, indexed without their title and headings, embedded by MiniLM at f16 with llama.cpp
  reading up to 512 tokens, two passages a call;
- `now`: the defaults (`index_collection` as the product calls it).

Reported per corpus and path: `docs_keyword_recall_at1`, `docs_paraphrase_recall_at5` (and
recall@1/@5/MRR of each set), `docs_embed_passages_per_s` and characters/s while indexing, and
the ratio of the two paths' rates (`docs_embed_speedup`). The held-out corpus
(`docs_heldout_corpus`) is the one nothing was tuned on; nor on the second
(`docs_heldout2_corpus`, its questions written blind by another engineer) and the third
(`docs_heldout3_corpus`, its questions written before the documents were opened); each skipped
where its files are absent or changed. The machine is shared: only the ratios measured in one run mean
anything.
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
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import engine.docs.indexer as indexer
from engine.docs.chunk import Chunk, chunk_blocks
from engine.docs.default_format import default_copy
from engine.docs.embed import DEFAULT_EMBEDDER, DEFAULT_WINDOW, Embedder, LlamaEmbedder, shared_embedder
from engine.docs.extract import Block
from engine.docs.index import DocIndex
from models.library.default_embedder import default_embedder_path
from tests.bench import (
    docs_debian_corpus,
    docs_debian_questions,
    docs_heldout2_corpus,
    docs_heldout2_questions,
    docs_heldout3_corpus,
    docs_heldout3_questions,
    docs_heldout_corpus,
    docs_heldout_questions,
    docs_questions,
    docs_stdlib,
)
from tests.bench.docs_retrieval import ranks, scores
from tests.bench.report import dated, say

Questions = Sequence[tuple[str, str]]
CORPORA: dict[str, tuple[Callable[[Path], object], Questions, Questions]] = {
    "heldout": (docs_heldout_corpus.write_corpus, docs_heldout_questions.KEYWORD, docs_heldout_questions.PARAPHRASE),
    "heldout2": (
        docs_heldout2_corpus.write_corpus,
        docs_heldout2_questions.KEYWORD,
        docs_heldout2_questions.PARAPHRASE,
    ),
    "heldout3": (
        docs_heldout3_corpus.write_corpus,
        docs_heldout3_questions.KEYWORD,
        docs_heldout3_questions.PARAPHRASE,
    ),
    "debian": (docs_debian_corpus.write_corpus, docs_debian_questions.KEYWORD, docs_debian_questions.PARAPHRASE),
    "stdlib": (docs_stdlib.write_corpus, docs_questions.KEYWORD, docs_questions.PARAPHRASE),
}
# The held-out corpora copied from this machine's files: skipped where one is absent or changed.
PROBLEMS: dict[str, Callable[[], list[str]]] = {
    "heldout2": docs_heldout2_corpus.problems,
    "heldout3": docs_heldout3_corpus.problems,
}
TODAY_TARGET, TODAY_OVERLAP, TODAY_TOKENS, TODAY_GROUP = 1200, 200, 512, 2


class Counted:
    """An embedder that counts what it embeds and how long it takes."""

    def __init__(self, inner: Embedder, group: int | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.group = group
        self.seconds = 0.0
        self.passages = 0
        self.chars = 0

    def embed(self, texts: Sequence[str]) -> Any:
        started = time.perf_counter()
        out = self.inner.embed(texts)
        self.seconds += time.perf_counter() - started
        self.passages += len(texts)
        self.chars += sum(map(len, texts))
        return out


@contextlib.contextmanager
def today_chunks() -> Iterator[None]:
    """Passages as before issue #50: 1,200 characters, no head indexed."""

    def old(blocks: Iterable[Block], *_: object, **__: object) -> Iterator[Chunk]:
        for c in chunk_blocks(blocks, TODAY_TARGET, TODAY_OVERLAP):
            yield Chunk(c.text, c.page, c.start, c.end)

    saved = indexer.chunk_blocks
    indexer.chunk_blocks = old  # pyright: ignore[reportAttributeAccessIssue]
    try:
        yield
    finally:
        indexer.chunk_blocks = saved


@contextlib.contextmanager
def today_groups() -> Iterator[None]:
    import engine.docs.embed as embed

    saved = embed.GROUP
    embed.GROUP = TODAY_GROUP
    try:
        yield
    finally:
        embed.GROUP = saved


def one_path(
    folder: Path,
    db: Path,
    embedder: Counted,
    questions: tuple[Questions, Questions],
    searched_with: Embedder | None = None,
) -> dict[str, Any]:
    """Index `folder` with `embedder`, ask `questions`; with `searched_with`, ask them again with
    that embedder's query vectors (a collection embedded in one format, searched in another)."""
    with DocIndex.open(db) as index:
        coll = index.create_collection("c", DEFAULT_EMBEDDER)
        index.add_roots(coll, [folder])
        started = time.perf_counter()
        report = indexer.index_collection(index, coll, embedder=embedder)
        wall = time.perf_counter() - started
        keyword, paraphrase = (ranks(index, coll, embedder.inner, q) for q in questions)
        other = [ranks(index, coll, searched_with, q) for q in questions] if searched_with is not None else None
    k, p = scores(keyword), scores(paraphrase)
    out = {} if other is None else {"searched_with_now": {"keyword": scores(other[0]), "paraphrase": scores(other[1])}}
    return out | {
        "files": len(report.indexed),
        "failed": len(report.failed),
        "passages": report.chunks,
        "indexing_s": round(wall, 1),
        "docs_embed_passages_per_s": round(embedder.passages / embedder.seconds, 2),
        "docs_embed_chars_per_s": round(embedder.chars / embedder.seconds),
        "docs_keyword_recall_at1": k["recall_at_1"],
        "docs_paraphrase_recall_at5": p["recall_at_5"],
        "keyword": k,
        "paraphrase": p,
        "paraphrase_missed": [q for (q, _), r in zip(questions[1], paraphrase, strict=True) if r is None or r > 5],
        "keyword_not_first": [q for (q, _), r in zip(questions[0], keyword, strict=True) if r != 1],
    }


def measure(
    name: str, tmp: Path, today: LlamaEmbedder | None, now: Embedder, q8: Embedder | None = None
) -> dict[str, Any]:
    write, keyword, paraphrase = CORPORA[name]
    if name in PROBLEMS and (missing := PROBLEMS[name]()):  # named by SHA-256: all or nothing
        say(f"{name}: skipped, its corpus is not on this machine: " + "; ".join(missing))
        return {"skipped": missing}
    folder = tmp / name
    write(folder)
    out: dict[str, Any] = {"load_start": os.getloadavg()[0]}
    if q8 is not None:  # the Q8_0 default before the per-CPU format, and its collection searched now
        say(f"{name}: the Q8_0 default before")
        out["q8_default"] = one_path(folder, tmp / f"{name}-q8.sqlite3", Counted(q8), (keyword, paraphrase), now)
    if today is None:  # --now-only: the defaults alone (today's figures from an earlier run)
        out["now"] = one_path(folder, tmp / f"{name}-now.sqlite3", Counted(now), (keyword, paraphrase))
        return out
    say(f"{name}: today's path")
    with today_chunks(), today_groups():
        out["today"] = one_path(folder, tmp / f"{name}-today.sqlite3", Counted(today), (keyword, paraphrase))
    say(f"{name}: the defaults")
    out["now"] = one_path(folder, tmp / f"{name}-now.sqlite3", Counted(now), (keyword, paraphrase))
    out["docs_embed_speedup"] = round(
        out["now"]["docs_embed_passages_per_s"] / out["today"]["docs_embed_passages_per_s"], 2
    )
    out["docs_embed_chars_speedup"] = round(
        out["now"]["docs_embed_chars_per_s"] / out["today"]["docs_embed_chars_per_s"], 2
    )
    out["load_end"] = os.getloadavg()[0]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Issue #50: recall and embedding speed, before and now")
    p.add_argument(
        "--corpus", nargs="+", choices=sorted(CORPORA), default=["heldout", "heldout2", "heldout3", "debian", "stdlib"]
    )
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--now-only", action="store_true", help="the defaults alone (half the time)")
    p.add_argument("--q8", action="store_true", help="also the Q8_0 default before, its collection searched now")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ember-bench-recall-") as name:
        tmp = Path(name)
        os.environ.setdefault("EMBER_HOME", str(tmp / "home"))
        f16 = default_embedder_path()
        today = None if args.now_only else LlamaEmbedder.load(f16, max_tokens=TODAY_TOKENS, flash_attn=False)
        now = shared_embedder(DEFAULT_EMBEDDER)
        q8 = LlamaEmbedder.load(default_copy(f16, "Q8_0"), max_tokens=DEFAULT_WINDOW) if args.q8 else None
        result: dict[str, Any] = dated(now_model=now.name)
        for corpus in args.corpus:
            result[corpus] = measure(corpus, tmp, today, now, q8)
            say(
                json.dumps(
                    {corpus: {k: v for k, v in result[corpus].items() if k not in ("today", "now", "q8_default")}}
                )
            )
            if args.json is not None:
                args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")
        if today is not None:
            today.close()
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
