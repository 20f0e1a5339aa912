"""The documents benchmarks run and report their fields on tiny inputs (figures are never asserted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.docs.extract import extract
from tests.bench.cli_docs import report_rows
from tests.bench.docs import measure_big_file, measure_embed_index, measure_pdf, measure_recall, measure_search
from tests.bench.docs_corpus import needle_corpus, write_pdf


def test_generated_pdfs_have_a_text_layer_per_page(tmp_path: Path) -> None:
    pages = write_pdf(tmp_path / "g.pdf", ["first page words", "second page words"])
    blocks = list(extract(tmp_path / "g.pdf"))
    assert pages == 2 and [(b.page, b.text.strip()) for b in blocks] == [
        (1, "first page words"),
        (2, "second page words"),
    ]


def test_needles_are_unique_and_in_their_files(tmp_path: Path) -> None:
    needles = needle_corpus(tmp_path, files=30)
    assert len({n.answer for n in needles}) == 30
    assert all(n.answer in n.path.read_text() for n in needles)


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
def test_pdf_search_recall_and_big_file_rows(tmp_path: Path) -> None:
    out = measure_pdf(tmp_path, pages=5, runs=2)
    out |= measure_search(tmp_path, (2000,), queries=3)
    out |= measure_recall(tmp_path, None, None, files=20)
    out |= measure_big_file(tmp_path, 2)
    assert out["docs_pdf_pages"] == 5 and out["docs_index_pdf_pages_per_s"] > 0 and out["docs_pdf_vs_pdfium_ratio"]
    assert out["docs_search_ms_2k"] > 0 and out["docs_search_p90_ms_2k"] >= out["docs_search_ms_2k"]
    assert out["docs_search_found_at_8_2k"] >= 0.6  # three of a passage's own words find it, on 3 questions
    assert out["docs_needle_recall_at_5"] >= 0.9 and out["docs_needle_recall_at_5_vectors"] is None
    assert out["docs_index_peak_rss_mb"] > 0 and out["docs_big_file_chunks"] > 1000
    rows = report_rows(out, lambda label, value: f"{label}: {value}")
    assert any(r.startswith("docs: index a PDF: ") for r in rows) and any("2k passages" in r for r in rows)


@pytest.mark.slow
@pytest.mark.timeout(600)  # a loaded machine; the model work itself is seconds
def test_indexing_with_the_embedder_is_compared_with_raw_embedding(tmp_path: Path, smollm_path: Path) -> None:
    out = measure_embed_index(smollm_path, tmp_path, files=1, runs=1, threads=1)
    assert out["docs_embed_chunks"] > 0 and out["docs_index_chunks_per_s"] > 0
    assert out["docs_raw_embed_chunks_per_s"] > 0
