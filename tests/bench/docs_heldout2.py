"""The second held-out set measured with Ember's defaults, each miss named with what ranked first.

    uv run --no-sync python -m tests.bench.docs_heldout2 [--json OUT]

Also part of `python -m tests.bench` (documents, unless `--no-docs`) and a corpus of
`python -m tests.bench.docs_recall` (`--corpus heldout2`). The corpus (`docs_heldout2_corpus`) is
indexed as the product indexes a folder (`index_collection`, the default embedder) and each
question of `docs_heldout2_questions` is ranked by `docs_retrieval.ranks`, the code behind every
other set's `docs_keyword_recall_at1` and `docs_paraphrase_recall_at5`. Figures are reported,
never asserted. Where the corpus's files are absent or changed, the set is skipped with a note.
"""

from __future__ import annotations

# isort: off
import engine.llama.llama_first  # noqa: F401  # pyright: ignore[reportUnusedImport]  (llama.cpp before numpy)
# isort: on

import argparse
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.docs.embed import DEFAULT_EMBEDDER, Embedder, shared_embedder
from engine.docs.index import Collection, DocIndex
from engine.docs.indexer import index_collection
from engine.docs.sources import CollectionSource
from tests.bench.docs_heldout2_corpus import problems, write_corpus
from tests.bench.docs_heldout2_questions import KEYWORD, PARAPHRASE
from tests.bench.docs_retrieval import DEPTH, ranks, scores
from tests.bench.report import dated, emit, say

PREFIX = "docs_heldout2_"


def misses(
    index: DocIndex,
    coll: Collection,
    embedder: Embedder,
    questions: Sequence[tuple[str, str]],
    found: Sequence[int | None],
    worse_than: int,
) -> list[dict[str, Any]]:
    """The questions whose answer file ranked below `worse_than` (or not at all), with the file that came first."""
    source = CollectionSource(index, coll, embedder)
    out: list[dict[str, Any]] = []
    for (question, answer), rank in zip(questions, found, strict=True):
        if rank is not None and rank <= worse_than:
            continue
        files = list(dict.fromkeys(Path(r.path).stem for r in source.search(question, DEPTH)))
        out.append({"question": question, "expected": answer, "rank": rank, "first": files[0] if files else None})
    return out


@dataclass(frozen=True, slots=True)
class HeldOutSet:
    """A held-out corpus and its questions, as `ember bench` measures them (`docs_heldout3` too)."""

    name: str  # the corpus folder's and the collection's: "heldout2"
    prefix: str  # of every figure's name: "docs_heldout2_"
    label: str  # "second held-out set"
    write_corpus: Callable[[Path], object]
    keyword: Sequence[tuple[str, str]]
    paraphrase: Sequence[tuple[str, str]]


SECOND = HeldOutSet("heldout2", PREFIX, "second held-out set", write_corpus, KEYWORD, PARAPHRASE)


def measure_heldout2(say: Callable[[str], None], notes: list[str] | None = None) -> dict[str, Any]:
    """`docs_heldout2_*`: recall@1/@5 and MRR of both kinds with the defaults, and the misses."""
    return measure_set(SECOND, problems(), say, notes)


def measure_set(
    held: HeldOutSet, missing: list[str], say: Callable[[str], None], notes: list[str] | None = None
) -> dict[str, Any]:
    """`<prefix>*` of one held-out set (skipped with a note when `missing` names absent or changed files)."""
    prefix = held.prefix
    if missing:
        note = f"docs: {held.label} skipped, its corpus is not on this machine: " + "; ".join(missing)
        if notes is not None:
            notes.append(note)
        say(note)
        return {f"{prefix}skipped": missing}
    with tempfile.TemporaryDirectory(prefix=f"ember-bench-{held.name}-") as tmp:
        folder = Path(tmp) / held.name
        held.write_corpus(folder)
        with DocIndex.open(Path(tmp) / "h.sqlite3") as index:
            coll = index.create_collection(held.name, DEFAULT_EMBEDDER)
            index.add_roots(coll, [folder])
            embedder = shared_embedder(DEFAULT_EMBEDDER)
            say(f"docs: indexing the {held.label}'s corpus with the defaults")
            started = time.perf_counter()
            report = index_collection(index, coll, embedder=embedder)
            wall = time.perf_counter() - started
            keyword, paraphrase = (ranks(index, coll, embedder, q) for q in (held.keyword, held.paraphrase))
            k, p = scores(keyword), scores(paraphrase)
            return {
                f"{prefix}files": len(report.indexed),
                f"{prefix}failed": [f"{path}: {error}" for path, error in report.failed + report.skipped],
                f"{prefix}passages": report.chunks,
                f"{prefix}indexing_s": round(wall, 1),
                f"{prefix}keyword_recall_at1": k["recall_at_1"],
                f"{prefix}paraphrase_recall_at5": p["recall_at_5"],
                f"{prefix}keyword": k,
                f"{prefix}paraphrase": p,
                f"{prefix}keyword_not_first": misses(index, coll, embedder, held.keyword, keyword, 1),
                f"{prefix}paraphrase_not_in_top5": misses(index, coll, embedder, held.paraphrase, paraphrase, 5),
                f"{prefix}paraphrase_not_first": misses(index, coll, embedder, held.paraphrase, paraphrase, 1),
            }


def report_row(r: dict[str, Any], row: Callable[[str, str], str]) -> list[str]:
    """The held-out set's line in `python -m tests.bench`'s table."""
    return set_row(SECOND, r, row)


def set_row(held: HeldOutSet, r: dict[str, Any], row: Callable[[str, str], str]) -> list[str]:
    prefix = held.prefix
    if r.get(f"{prefix}keyword") is None:
        return []
    k, p = r[f"{prefix}keyword"], r[f"{prefix}paraphrase"]
    return [
        row(
            f"docs: {held.label}",
            f"keyword {k['recall_at_1']}/{k['recall_at_5']}/{k['mrr']}, "
            f"paraphrase {p['recall_at_1']}/{p['recall_at_5']}/{p['mrr']} "
            f"(recall@1/@5/MRR, defaults; {r[f'{prefix}files']} files, {r[f'{prefix}passages']} passages)",
        )
    ]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Issue #50's second held-out set, with Ember's defaults")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="ember-bench-heldout2-home-") as home:
        os.environ.setdefault("EMBER_HOME", home)
        result = dated() | measure_heldout2(say)
    return emit(result, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
