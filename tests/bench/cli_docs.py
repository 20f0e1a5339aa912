"""The documents part of `ember bench` (measured in `tests.bench.docs`; no Qt in this process).

`--docs-big-file-mb N` adds the peak-memory figure on an N MB text file (1024 for the documented
1 GB figure; off by default: it writes that much to the temporary folder and takes minutes).
`--no-docs` leaves the documents benchmarks out.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from tests.bench import docs_heldout2, docs_heldout3
from tests.bench.docs import measure_docs
from tests.bench.docs_retrieval import measure_retrieval
from tests.bench.suite import BenchConfig


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--docs-big-file-mb",
        type=int,
        default=0,
        metavar="MB",
        help="also measure peak memory while indexing a text file of this size (1024 = 1 GB)",
    )
    p.add_argument("--no-docs", action="store_true", help="leave out the documents benchmarks")


def collect(
    args: argparse.Namespace, config: BenchConfig, say: Callable[[str], None], notes: list[str]
) -> dict[str, Any]:
    if args.no_docs:
        return {}
    out = measure_docs(
        config.model_path(),
        quick=args.quick,
        threads=config.threads,
        big_file_mb=args.docs_big_file_mb,
        say=say,
        notes=notes,
    )
    out |= measure_retrieval(config.model_path(), say)
    return out | docs_heldout2.measure_heldout2(say, notes) | docs_heldout3.measure_heldout3(say, notes)


def report_rows(r: dict[str, Any], row: Callable[[str, str], str]) -> list[str]:
    lines: list[str] = []
    if r.get("docs_index_chunks_per_s") is not None:
        lines.append(
            row(
                "docs: index with embeddings",
                f"{r['docs_index_chunks_per_s']} passages/s vs raw embed "
                f"{r['docs_raw_embed_chunks_per_s']}/s (x{r['docs_index_vs_raw_embed_ratio']}; "
                f"{r['docs_embed_chunks']} passages, {r['docs_embed_model']})",
            )
        )
    if r.get("docs_index_pdf_pages_per_s") is not None:
        lines.append(
            row(
                "docs: index a PDF",
                f"{r['docs_index_pdf_pages_per_s']} pages/s vs pypdfium2 "
                f"{r['docs_pdfium_pages_per_s']}/s (x{r['docs_pdf_vs_pdfium_ratio']}; "
                f"{r['docs_pdf_pages']} pages)",
            )
        )
    searches = [
        _search(r, key.removeprefix("docs_search_ms_"))
        for key, value in r.items()
        if key.startswith("docs_search_ms_") and value is not None
    ]
    if searches:
        lines.append(row("docs: hybrid search", "; ".join(searches) + " (BM25 + 384-d vectors, Zipf corpus)"))
    if r.get("docs_needle_recall_at_5") is not None:
        vectors = r.get("docs_needle_recall_at_5_vectors")
        lines.append(
            row(
                "docs: needle recall@5",
                f"{r['docs_needle_recall_at_5']} BM25 alone"
                + (f", {vectors} with vectors" if vectors is not None else "")
                + f" ({r['docs_needle_files']} files)",
            )
        )
    if r.get("docs_recall_at_1") is not None:
        lines.append(row("docs: retrieval set", _retrieval(r)))
    lines += docs_heldout2.report_row(r, row) + docs_heldout3.report_row(r, row)
    if r.get("docs_embed_passages_per_s") is not None:
        chat = (
            f" vs the chat model {r['docs_embed_chat_passages_per_s']}/s (x{r['docs_embed_vs_chat_ratio']})"
            if r.get("docs_embed_chat_passages_per_s")
            else ""
        )
        lines.append(
            row(
                "docs: embedding",
                f"{r['docs_embed_passages_per_s']} passages/s "
                f"({r['docs_embed_model']}){chat}; search {r['docs_search_ms']} ms warm",
            )
        )
    if r.get("docs_index_peak_rss_mb") is not None:
        lines.append(
            row(
                "docs: peak memory, big file",
                f"{r['docs_index_peak_rss_mb']} MB indexing "
                f"{r['docs_big_file_mb']:,} MB of text ({r['docs_big_file_s']} s, "
                f"{r['docs_big_file_chunks']:,} passages)",
            )
        )
    return lines


def _retrieval(r: dict[str, Any]) -> str:
    """recall@1 / recall@5 / MRR for BM25 alone and hybrid, keyword and paraphrase questions apart."""
    parts = []
    for mode in ("bm25", "hybrid"):
        figures = [
            f"{kind} {r[f'docs_recall_at_1_{mode}_{kind}']}/{r[f'docs_recall_at_5_{mode}_{kind}']}/"
            f"{r[f'docs_mrr_{mode}_{kind}']}"
            for kind in ("keyword", "paraphrase")
        ]
        parts.append(f"{mode}: " + ", ".join(figures))
    return "; ".join(parts) + f" (recall@1/@5/MRR, {r['docs_retrieval_questions']} questions, stdlib docstrings)"


def _search(r: dict[str, Any], size: str) -> str:
    """One corpus size's search figures: median and p90 latency, and how often the passage asked about came back."""
    text = f"{size} passages {r[f'docs_search_ms_{size}']} ms median"
    if r.get(f"docs_search_p90_ms_{size}") is not None:
        text += f", p90 {r[f'docs_search_p90_ms_{size}']} ms"
    if r.get(f"docs_search_bm25_ms_{size}") is not None:
        text += f" (BM25 alone {r[f'docs_search_bm25_ms_{size}']} ms)"
    if r.get(f"docs_search_found_at_8_{size}") is not None:
        text += f", source in top 8: {r[f'docs_search_found_at_8_{size}']}"
    return text
