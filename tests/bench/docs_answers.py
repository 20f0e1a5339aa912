"""Issue #50: five `ember chat --docs` answers from the built-in model, each with the sources it shows.

    uv run --no-sync python -m tests.bench.docs_answers [--json OUT]

The held-out corpus (`docs_heldout_corpus`) is indexed with the defaults as the collection
`heldout`, then five of its questions go through `ember chat --docs heldout --events` in this
process (greedy, the built-in SmolLM2). For each answer: the sources it shows (the model's `[n]`,
else each paragraph's supporting passages, `engine.docs.attribution`) and whether one of them
comes from the file that answers the question. `docs_attribution_precision`: of the passages
shown as supporting a paragraph, the share from the answer's file (the label; a question is
answered by one file), over the five answers; `docs_answers_with_right_source`: how many of the
five show at least one supporting passage of that file; `docs_answers_showing_right_source`: how
many show one of that file as where the answer came from (`answer_from`: the supporting passages,
or, when no paragraph matched one, every passage the model was given, labelled so; how many
fell back to that: `docs_answers_shown_as_given`). `…_pooled`: the same with each answer attributed
against the passages of all five (the other four files' passages as distractors), where
precision can fall below 1.
"""

from __future__ import annotations

# isort: off
import engine.llama.llama_first  # noqa: F401  # pyright: ignore[reportUnusedImport]  (llama.cpp before numpy)
# isort: on

import argparse
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.docs.embed import DEFAULT_EMBEDDER, shared_embedder
from engine.docs.index import DocIndex, default_path
from engine.docs.indexer import index_collection
from tests.bench import docs_heldout_questions as q
from tests.bench.docs_debian import answer_figures, chat_once
from tests.bench.docs_heldout_corpus import write_corpus
from tests.bench.report import dated, emit, say

COLLECTION = "heldout"
QUESTIONS: list[tuple[str, str]] = [
    ("How can a program tell the monitor to go into standby or switch off to save power?", q.DPMS),
    ("Which command can rotate or crop an existing photo file without losing quality?", q.USAGE),
    ("Is there a command-line tool like jq for YAML files that keeps comments and formatting?", q.YQ),
    ("How does a reader check that a compressed container file was not truncated or damaged?", q.XZ),
    ("The special function key on my Mac keyboard does nothing under X; what can I do?", q.XKB),
]


def precision(figures: Sequence[dict[str, Any]]) -> dict[str, Any]:
    shown = [(f["answer_file"], s) for f in figures for s in f["shown_sources"]]
    right = sum(answer == stem for answer, stem in shown)
    return {
        "docs_attribution_precision": round(right / len(shown), 3) if shown else None,
        "docs_attribution_shown": len(shown),
        "docs_answers_with_right_source": sum(f["shown_right_file"] for f in figures),
        # every answer shows where it came from: its supporting passages, else all it was given (labelled so)
        "docs_answers_showing_right_source": sum(f["answer_from_right_file"] for f in figures),
        "docs_answers_shown_as_given": sum(f["answer_from_basis"] == "given" for f in figures),
        "docs_answers_citing": sum(bool(f["cited"]) for f in figures),
    }


def pooled(figures: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The harder labelled set: each answer attributed against the passages of all five answers
    (four other files' passages as distractors); precision = shown passages from its own file."""
    from engine.docs.attribution import attribute
    from engine.events import SourceRef

    pool = [(p["file"], p["text"]) for f in figures for p in f["passages"]]
    refs = [SourceRef(i + 1, stem, None, 0, 0, 0.0, text) for i, (stem, text) in enumerate(pool)]
    shown = right = answered = 0
    for f in figures:
        numbers = list(dict.fromkeys(n for p in attribute(f["answer"], refs) for n in p.sources))
        hits = sum(refs[n - 1].path == f["answer_file"] for n in numbers)
        shown, right, answered = shown + len(numbers), right + hits, answered + (hits > 0)
    return {
        "docs_attribution_precision_pooled": round(right / shown, 3) if shown else None,
        "docs_attribution_pooled_shown": shown,
        "docs_answers_with_right_source_pooled": answered,
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Issue #50: five answers from documents and the sources they show")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    result: dict[str, Any] = dated(load=os.getloadavg()[0])
    with tempfile.TemporaryDirectory(prefix="ember-bench-answers-") as name:
        tmp = Path(name)
        os.environ["EMBER_HOME"] = str(tmp / "home")
        folder = tmp / "corpus"
        write_corpus(folder)
        with DocIndex.open(default_path()) as index:
            coll = index.create_collection(COLLECTION, DEFAULT_EMBEDDER)
            index.add_roots(coll, [folder])
            say("indexing the held-out corpus with the defaults")
            result["passages"] = index_collection(index, coll, embedder=shared_embedder(DEFAULT_EMBEDDER)).chunks
        figures: list[dict[str, Any]] = []
        for question, answer_file in QUESTIONS:
            say(f"ember chat --docs: {question}")
            run = chat_once(question, COLLECTION)
            given = next((e["sources"] for e in run["events"] if e["type"] == "sources"), [])
            passages = [{"n": s["n"], "file": Path(s["path"]).stem, "text": s["text"]} for s in given]
            figures.append(
                {"question": question, "answer_file": answer_file}
                | answer_figures(run, answer_file)
                | {"passages": passages}  # with the answer and its file: a labelled attribution case
            )
        result["answers"] = figures
        result |= precision(figures) | pooled(figures)
    return emit(result, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
