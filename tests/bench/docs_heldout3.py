"""The third held-out set measured with Ember's defaults, each miss named with what ranked first.

    uv run --no-sync python -m tests.bench.docs_heldout3 [--json OUT]

Measured as the second (`docs_heldout2`, whose code does it): the corpus (`docs_heldout3_corpus`)
indexed as the product indexes a folder, each question of `docs_heldout3_questions` (written before
the documents were opened) ranked by `docs_retrieval.ranks`; figures `docs_heldout3_*`, reported,
never asserted. Also part of `python -m tests.bench` (documents, unless `--no-docs`) and a corpus of
`python -m tests.bench.docs_recall` and `tests.bench.docs_fusion` (`--corpus heldout3`). Where the
corpus's files are absent or changed, the set is skipped with a note.
"""

from __future__ import annotations

# isort: off
import engine.llama.llama_first  # noqa: F401  # pyright: ignore[reportUnusedImport]  (llama.cpp before numpy)
# isort: on

import argparse
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tests.bench.docs_heldout2 import HeldOutSet, measure_set, set_row
from tests.bench.docs_heldout3_corpus import problems, write_corpus
from tests.bench.docs_heldout3_questions import KEYWORD, PARAPHRASE
from tests.bench.report import dated, emit, say

PREFIX = "docs_heldout3_"
THIRD = HeldOutSet("heldout3", PREFIX, "third held-out set", write_corpus, KEYWORD, PARAPHRASE)


def measure_heldout3(say: Callable[[str], None], notes: list[str] | None = None) -> dict[str, Any]:
    """`docs_heldout3_*`: recall@1/@5 and MRR of both kinds with the defaults, and the misses."""
    return measure_set(THIRD, problems(), say, notes)


def report_row(r: dict[str, Any], row: Callable[[str, str], str]) -> list[str]:
    """The third held-out set's line in `python -m tests.bench`'s table."""
    return set_row(THIRD, r, row)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Issue #50's third held-out set, with Ember's defaults")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="ember-bench-heldout3-home-") as home:
        os.environ.setdefault("EMBER_HOME", home)
        result = dated() | measure_heldout3(say)
    return emit(result, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
