"""Issue #50: the attribution threshold chosen on a labelled set of answers that is not the five shown.

    uv run --no-sync python -m tests.bench.docs_attribution_set [--json OUT] [--from SAVED.json]

The held-out corpus is indexed with the defaults; then the built-in model (greedy) answers, through
`ember chat --docs --events`, the held-out set's fifteen other paraphrase questions (the **tuning
set**: what the threshold is chosen on) and the five of `docs_answers` (the **test set**: looked
at only with the chosen threshold). Each answer is labelled by the file that answers its question:
a passage shown as supporting a paragraph is right when it comes from that file.

For each threshold (5 % to 45 %) and each set: `precision` (shown passages from the answer's
file, over all shown), `answers_with_right_source` and `answers_with_any_source`. The threshold
chosen is the one that shows a right source for the most tuning answers while keeping precision
≥ `MIN_PRECISION`; a tie goes to the higher (stricter) threshold. `--from` redoes the sweep on a
saved run's answers (no model needed).
"""

from __future__ import annotations

# isort: off
import engine.llama.llama_first  # noqa: F401  # pyright: ignore[reportUnusedImport]  (llama.cpp before numpy)
# isort: on

import argparse
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import engine.docs.attribution as attribution
from engine.docs.embed import DEFAULT_EMBEDDER, shared_embedder
from engine.docs.index import DocIndex, default_path
from engine.docs.indexer import index_collection
from engine.events import SourceRef
from tests.bench import docs_heldout_questions as q
from tests.bench.docs_answers import COLLECTION, QUESTIONS
from tests.bench.docs_debian import chat_once
from tests.bench.docs_heldout_corpus import write_corpus
from tests.bench.report import dated, emit, say

TUNING = [(question, file) for question, file in q.PARAPHRASE if (question, file) not in QUESTIONS]
THRESHOLDS = [round(0.05 * i, 2) for i in range(1, 10)]
MIN_PRECISION = 0.9


def answer_case(question: str, answer_file: str) -> dict[str, Any]:
    """One answer with the passages its prompt carried, labelled by the file that answers the question."""
    say(f"ember chat --docs: {question}")
    run = chat_once(question, COLLECTION)
    events: list[dict[str, Any]] = run["events"]
    given = next((e["sources"] for e in events if e["type"] == "sources"), [])
    return {
        "question": question,
        "answer_file": answer_file,
        "answer": "".join(e["text"] for e in events if e["type"] == "content"),
        "passages": [{"n": s["n"], "file": Path(s["path"]).stem, "text": s["text"]} for s in given],
    }


def scored(cases: Sequence[dict[str, Any]], threshold: float) -> dict[str, Any]:
    saved = attribution.THRESHOLD
    attribution.THRESHOLD = threshold
    try:
        shown = right = with_right = with_any = 0
        for case in cases:
            refs = [SourceRef(p["n"], p["file"], None, 0, 0, 0.0, p["text"]) for p in case["passages"]]
            files = {ref.n: ref.path for ref in refs}
            numbers = list(dict.fromkeys(n for p in attribution.attribute(case["answer"], refs) for n in p.sources))
            hits = sum(files[n] == case["answer_file"] for n in numbers)
            shown, right = shown + len(numbers), right + hits
            with_right, with_any = with_right + (hits > 0), with_any + bool(numbers)
    finally:
        attribution.THRESHOLD = saved
    return {
        "threshold": threshold,
        "precision": round(right / shown, 3) if shown else None,
        "shown": shown,
        "answers_with_right_source": with_right,
        "answers_with_any_source": with_any,
        "answers": len(cases),
    }


def choose(sweep: Sequence[dict[str, Any]]) -> float:
    ok = [row for row in sweep if row["precision"] is not None and row["precision"] >= MIN_PRECISION]
    best = max(ok, key=lambda row: (row["answers_with_right_source"], row["threshold"]))
    return float(best["threshold"])


def sweep_both(tuning: Sequence[dict[str, Any]], test: Sequence[dict[str, Any]]) -> dict[str, Any]:
    tuning_rows = [scored(tuning, t) for t in THRESHOLDS]
    chosen = choose(tuning_rows)
    return {
        "tuning_sweep": tuning_rows,
        "test_sweep": [scored(test, t) for t in THRESHOLDS],
        "chosen_threshold": chosen,
        "default_threshold": attribution.THRESHOLD,
        "test_at_chosen": scored(test, chosen),
        "tuning_at_chosen": scored(tuning, chosen),
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Issue #50: the attribution threshold, chosen on a labelled set")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--from", dest="saved", type=Path, default=None, help="a saved run: the sweep alone")
    args = p.parse_args(argv)
    if args.saved is not None:
        result: dict[str, Any] = json.loads(args.saved.read_text(encoding="utf-8"))
    else:
        result = dated(load=os.getloadavg()[0])
        with tempfile.TemporaryDirectory(prefix="ember-bench-attribution-") as name:
            tmp = Path(name)
            os.environ["EMBER_HOME"] = str(tmp / "home")
            write_corpus(tmp / "corpus")
            with DocIndex.open(default_path()) as index:
                coll = index.create_collection(COLLECTION, DEFAULT_EMBEDDER)
                index.add_roots(coll, [tmp / "corpus"])
                say("indexing the held-out corpus with the defaults")
                index_collection(index, coll, embedder=shared_embedder(DEFAULT_EMBEDDER))
            result["tuning"] = [answer_case(question, file) for question, file in TUNING]
            result["test"] = [answer_case(question, file) for question, file in QUESTIONS]
    result |= sweep_both(result["tuning"], result["test"])
    return emit(result, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
