"""How long indexing a long PDF takes, as the user waits for it (BM25, as `ember docs add` does
without an embedder). Used to decide how PDF pages are read (docs/performance.md, "Documents").

    uv run --no-sync python tests/tools/pdf_index_time.py [PAGES] [ROUNDS]

Writes a PDF of PAGES generated pages (tests/doc_fixtures.py), indexes it ROUNDS times into
fresh databases and prints the median seconds.
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout, for tests.doc_fixtures

from engine.docs.index import DocIndex
from engine.docs.indexer import index_collection
from tests.doc_fixtures import filler, write_pdf


def index_seconds(folder: Path, pdf: Path, label: str) -> float:
    index = DocIndex.open(folder / f"{label}.sqlite3")
    try:
        coll = index.create_collection(label, "")
        index.add_roots(coll, [pdf])
        started = time.perf_counter()
        index_collection(index, coll)
        return time.perf_counter() - started
    finally:
        index.close()


def main(pages: int = 300, rounds: int = 5) -> None:
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        pdf = write_pdf(folder / "long.pdf", [filler(rng, 350) for _ in range(pages)])
        times = [index_seconds(folder, pdf, f"r{r}") for r in range(rounds)]
        print(
            f"{pages} pages, {rounds} rounds: median {statistics.median(times):.2f} s "
            f"(min {min(times):.2f}, max {max(times):.2f})"
        )


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
