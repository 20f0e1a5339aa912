"""The documents benchmarks of `ember bench` (every figure reported, never asserted).

- `docs_index_chunks_per_s`: a collection indexed with an embedder (extraction, chunking, FTS5,
  vectors), against raw llama-cpp-python embedding the very same passages, interleaved;
- `docs_index_pdf_pages_per_s`: a generated PDF indexed (BM25), against pypdfium2's own text
  extraction of the same pages;
- `docs_search_ms_10k` / `_100k`: one hybrid query (BM25 + vectors, fused) over that many passages
  of a Zipf-distributed vocabulary (so a question's words are selective, as in real text), with
  its p90, BM25 alone, and how often the passage a question was made from is in the top 8;
- `docs_needle_recall_at_5`: 200 generated files each hiding one fact; the share of questions
  whose file is in the top 5, with BM25 alone and with vectors;
- `docs_index_peak_rss_mb`: peak resident memory of a child indexing one large text file (1 GB
  for the documented figure; opt-in, it takes disk and minutes).
"""

from __future__ import annotations

import importlib
import itertools
import random
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# isort: off
import engine.llama.llama_first  # noqa: F401  # pyright: ignore[reportUnusedImport]  (llama.cpp before numpy)
import numpy as np
# isort: on

from engine.child_env import python_child
from engine.docs.embed import EMBED_CTX, LlamaEmbedder
from engine.docs.index import Collection, DocIndex
from engine.docs.indexer import index_collection
from engine.docs.sources import CollectionSource
from engine.errors import EngineError
from engine.llama.cpu_threads import default_threads
from tests.bench.docs_corpus import ZipfVocabulary, needle_corpus, prose, write_pdf
from tests.bench.llama import interleaved_rounds

Say = Callable[[str], None]
SEARCH_DIM = 384  # a typical small embedding model's width (bge-small, e5-small, MiniLM)


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


def _fresh(tmp: Path, label: str, roots: list[Path], embedder: str = "") -> tuple[DocIndex, Collection]:
    index = DocIndex.open(tmp / f"{label}.sqlite3")
    coll = index.create_collection(label, embedder)
    index.add_roots(coll, roots)
    return index, coll


# -- indexing with an embedder vs raw embedding ------------------------------------------------


def measure_embed_index(model: Path, tmp: Path, files: int, runs: int, threads: int | None) -> dict[str, Any]:
    folder = tmp / "embed-corpus"
    folder.mkdir()
    rng = random.Random(5)
    for i in range(files):
        (folder / f"doc-{i:03d}.md").write_text(f"# Document {i}\n\n{prose(rng, 700)}\n", encoding="utf-8")
    threads = threads or default_threads()  # both sides: the embedder's own default
    embedder = LlamaEmbedder.load(model, n_threads=threads)
    import llama_cpp

    from engine.llama.llama_plain import new_llama

    raw = new_llama(
        model_path=str(model),
        embedding=True,
        pooling_type=llama_cpp.LLAMA_POOLING_TYPE_MEAN,
        n_ctx=EMBED_CTX,
        n_batch=EMBED_CTX,
        n_ubatch=EMBED_CTX,
        n_threads=threads,
        n_threads_batch=threads,
        verbose=False,
    )
    ember_rates: list[float] = []
    raw_rates: list[float] = []
    chunks = 0
    try:
        for run in range(runs):
            index, coll = _fresh(tmp, f"embed{run}", [folder], str(model))
            started = time.perf_counter()
            report = index_collection(index, coll, embedder=embedder)
            ember_rates.append(report.chunks / (time.perf_counter() - started))
            texts = [t for _, t in index.chunk_texts(coll)]
            index.close()
            chunks = len(texts)
            started = time.perf_counter()
            for i in range(0, len(texts), 64):  # the indexer's batch size, so both sides batch alike
                raw.embed(texts[i : i + 64], normalize=True, truncate=True)
            raw_rates.append(len(texts) / (time.perf_counter() - started))
    finally:
        embedder.close()
        raw.close()
    ember, base = statistics.median(ember_rates), statistics.median(raw_rates)
    return {
        "docs_index_chunks_per_s": round(ember, 1),
        "docs_raw_embed_chunks_per_s": round(base, 1),
        "docs_index_vs_raw_embed_ratio": _ratio(ember, base),
        "docs_embed_chunks": chunks,
        "docs_embed_model": model.name,
    }


# -- PDF pages: Ember's index vs pypdfium2's own extraction --------------------------------------


def measure_pdf(tmp: Path, pages: int, runs: int) -> dict[str, Any]:
    """Ember's indexing against PDFium's own extraction of the same file, in alternating order.

    One pair of 300-page runs swings from 0.66 to 1.4 on a shared machine, so the ratio is the
    median of each round's ratio, and which side goes first rotates round by round.
    """
    rng = random.Random(8)
    pdf = tmp / "bench.pdf"
    write_pdf(pdf, (prose(rng, 400) for _ in range(pages)))
    runs_done = itertools.count()  # each Ember run indexes into a fresh database of its own
    rounds = list(
        interleaved_rounds(
            [lambda: _pdfium_pages_per_s(pdf), lambda: _ember_pdf_pages_per_s(tmp, pdf, next(runs_done))], runs
        )
    )
    raw_rates = [raw for raw, _ in rounds]
    ember_rates = [ember for _, ember in rounds]
    return {
        "docs_index_pdf_pages_per_s": round(statistics.median(ember_rates), 1),
        "docs_pdfium_pages_per_s": round(statistics.median(raw_rates), 1),
        "docs_pdf_vs_pdfium_ratio": _median_ratio(ember_rates, raw_rates),
        "docs_pdf_pages": pages,
        "docs_pdf_rounds": runs,
    }


def _median_ratio(rates: list[float], against: list[float]) -> float:
    return round(statistics.median(a / b for a, b in zip(rates, against, strict=True)), 3)


def _pdfium_pages_per_s(pdf: Path) -> float:
    pdfium: Any = importlib.import_module("pypdfium2")  # untyped
    started = time.perf_counter()
    document = pdfium.PdfDocument(str(pdf))
    pages = len(document)
    for i in range(pages):
        page = document[i]
        textpage = page.get_textpage()
        textpage.get_text_bounded()
        textpage.close()
        page.close()
    document.close()
    return pages / (time.perf_counter() - started)


def _ember_pdf_pages_per_s(tmp: Path, pdf: Path, run: int) -> float:
    index, coll = _fresh(tmp, f"pdf{run}", [pdf])
    try:
        started = time.perf_counter()
        report = index_collection(index, coll)
        return report.pages / (time.perf_counter() - started)
    finally:
        index.close()


# -- search latency -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SearchCorpus:
    index: DocIndex
    coll: Collection
    questions: list[tuple[str, str]]  # (question, the passage it was asked about)


def synthetic_index(
    path: Path, passages: int, questions: int = 20, dim: int = SEARCH_DIM, seed: int = 3
) -> SearchCorpus:
    """`passages` Zipf-distributed passages (~1,000 characters) with random unit vectors, written
    directly (no model), and `questions` asked about passages picked at random."""
    from engine.docs.chunk import Chunk

    rng = random.Random(seed)
    vocabulary = ZipfVocabulary.build()
    vectors = np.random.default_rng(seed).standard_normal((1000, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    asked = set(rng.sample(range(passages), min(questions, passages)))
    asked_about: list[tuple[str, str]] = []
    index = DocIndex.open(path)
    coll = index.create_collection("bench", "synthetic")
    per_file = 500
    for f in range(0, passages, per_file):
        file_id = index.begin_file(coll, f"/bench/file-{f // per_file:04d}.md", "h", 0, 0)
        n = min(per_file, passages - f)
        texts = [vocabulary.passage(rng, 170) for _ in range(n)]
        asked_about += [(vocabulary.question(rng, texts[i]), texts[i]) for i in range(n) if f + i in asked]
        chunks = [Chunk(text, None, i * 1000, i * 1000 + len(text)) for i, text in enumerate(texts)]
        index.add_chunks(file_id, chunks, vectors[np.arange(f, f + n) % len(vectors)])
        index.finish_file(file_id, pages=0, chunks=n)
    return SearchCorpus(index, coll, asked_about)


def measure_search(tmp: Path, sizes: tuple[int, ...], queries: int = 20) -> dict[str, Any]:
    """Median latency of one hybrid query, and how often the passage asked about is in the top 8."""
    out: dict[str, Any] = {}
    qvecs = np.random.default_rng(9).standard_normal((queries, SEARCH_DIM)).astype(np.float32)
    for size in sizes:
        corpus = synthetic_index(tmp / f"search-{size}.sqlite3", size, queries)
        index, coll = corpus.index, corpus.coll
        try:
            index.search(coll, corpus.questions[0][0], 8, qvecs[0])  # warm: the vectors load once, as in the app
            timings: list[float] = []
            words_only: list[float] = []
            found = 0
            for (question, passage), vector in zip(corpus.questions, qvecs, strict=False):
                started = time.perf_counter()
                hits = index.search(coll, question, 8, vector)
                timings.append((time.perf_counter() - started) * 1000)
                found += any(h.text == passage for h in hits)
                started = time.perf_counter()
                index.search(coll, question, 8)  # BM25 alone, interleaved: the same load for both
                words_only.append((time.perf_counter() - started) * 1000)
        finally:
            index.close()
        label = f"{size // 1000}k"
        out[f"docs_search_ms_{label}"] = round(statistics.median(timings), 2)
        out[f"docs_search_bm25_ms_{label}"] = round(statistics.median(words_only), 2)
        out[f"docs_search_p90_ms_{label}"] = round(sorted(timings)[int(0.9 * (len(timings) - 1))], 2)
        out[f"docs_search_found_at_8_{label}"] = round(found / len(timings), 3)
    return out


# -- needle recall ------------------------------------------------------------------------------


def measure_recall(tmp: Path, model: Path | None, threads: int | None, files: int = 200) -> dict[str, Any]:
    folder = tmp / "needles"
    needles = needle_corpus(folder, files)
    out: dict[str, Any] = {"docs_needle_files": files}
    for label, embed_model in (("", None), ("_vectors", model)):
        if label and embed_model is None:
            out["docs_needle_recall_at_5_vectors"] = None
            continue
        embedder = LlamaEmbedder.load(embed_model, n_threads=threads) if embed_model is not None else None
        index, coll = _fresh(tmp, f"needles{label}", [folder], str(embed_model or ""))
        try:
            index_collection(index, coll, embedder=embedder)
            source = CollectionSource(index, coll, embedder)
            found = sum(any(Path(r.path) == n.path for r in source.search(n.question, 5)) for n in needles)
        finally:
            index.close()
            if embedder is not None:
                embedder.close()
        out[f"docs_needle_recall_at_5{label}"] = round(found / len(needles), 3)
    return out


# -- peak memory on a large text file (a child process) -------------------------------------------

_CHILD = """
import json, resource, sys, time
from pathlib import Path
import engine.llama.llama_first
from engine.docs.index import DocIndex
from engine.docs.indexer import index_collection
index = DocIndex.open(Path(sys.argv[1]))
coll = index.create_collection("big")
index.add_roots(coll, [Path(sys.argv[2])])
started = time.perf_counter()
report = index_collection(index, coll)
print(json.dumps({"seconds": time.perf_counter() - started, "chunks": report.chunks,
                  "peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def measure_big_file(tmp: Path, megabytes: int) -> dict[str, Any]:
    import json

    big = tmp / "big.txt"
    rng = random.Random(6)
    block = "".join(prose(rng, 200) + "\n\n" for _ in range(50)).encode()
    with big.open("wb") as f:
        for _ in range(megabytes * (1 << 20) // len(block) + 1):
            f.write(block)
    child = python_child(_CHILD, str((tmp / "big.sqlite3").absolute()), str(big.absolute()))
    done = subprocess.run(
        child.argv, env=child.env, cwd=child.cwd, capture_output=True, text=True, timeout=7200, check=False
    )
    big.unlink()
    if done.returncode != 0:
        raise RuntimeError((done.stderr.strip().splitlines() or ["no output"])[-1])
    data = json.loads(done.stdout.strip().splitlines()[-1])
    return {
        "docs_index_peak_rss_mb": round(data["peak_kb"] / 1024, 1),
        "docs_big_file_mb": megabytes,
        "docs_big_file_s": round(data["seconds"], 1),
        "docs_big_file_chunks": data["chunks"],
    }


def measure_docs(
    model: Path, *, quick: bool, threads: int | None, big_file_mb: int, say: Say, notes: list[str]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="ember-docs-bench-") as name:
        tmp = Path(name)
        steps: list[tuple[str, Callable[[], dict[str, Any]]]] = [
            (
                "documents: indexing with embeddings vs raw llama-cpp-python",
                lambda: measure_embed_index(model, tmp, 4 if quick else 12, 1 if quick else 3, threads),
            ),
            ("documents: PDF pages vs pypdfium2", lambda: measure_pdf(tmp, 50 if quick else 300, 1 if quick else 11)),
            ("documents: hybrid search", lambda: measure_search(tmp, (10_000,) if quick else (10_000, 100_000))),
            ("documents: needle recall over 200 files", lambda: measure_recall(tmp, None if quick else model, threads)),
        ]
        if big_file_mb > 0:
            steps.append(
                (
                    f"documents: peak memory indexing a {big_file_mb:,} MB text file",
                    lambda: measure_big_file(tmp, big_file_mb),
                )
            )
        for label, step in steps:
            say(label)
            try:
                out.update(step())
            except (EngineError, OSError, RuntimeError, ValueError, subprocess.TimeoutExpired) as exc:
                notes.append(f"{label}: {exc}")
    return out
