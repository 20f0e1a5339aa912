"""The third held-out set in `ember bench`: measured as the second, skipped with a note, one row in the table."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

import tests.bench.cli_docs as cli_docs
import tests.bench.docs_heldout3 as bench
from tests.bench import docs_fusion, docs_recall


def _row(label: str, value: str) -> str:
    return f"{label}: {value}"


def test_the_bench_skips_the_third_set_with_a_note_when_its_corpus_is_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench, "problems", lambda: ["/usr/share/doc/tar/NEWS.gz: missing"])
    said: list[str] = []
    notes: list[str] = []
    out = bench.measure_heldout3(said.append, notes)
    assert out == {"docs_heldout3_skipped": ["/usr/share/doc/tar/NEWS.gz: missing"]}
    assert notes == said and "third held-out set skipped" in notes[0] and "tar/NEWS.gz: missing" in notes[0]
    assert bench.report_row(out, _row) == []


def test_ember_bench_measures_and_reports_both_blind_sets(monkeypatch: pytest.MonkeyPatch) -> None:
    figures = {"recall_at_1": 0.5, "recall_at_5": 0.75, "mrr": 0.6}

    def measured(prefix: str) -> dict[str, Any]:
        return {
            f"{prefix}keyword": figures,
            f"{prefix}paraphrase": figures | {"recall_at_1": 0.4},
            f"{prefix}files": 17,
            f"{prefix}passages": 500,
        }

    monkeypatch.setattr(cli_docs, "measure_docs", lambda *_, **__: {})
    monkeypatch.setattr(cli_docs, "measure_retrieval", lambda *_: {})
    monkeypatch.setattr(cli_docs.docs_heldout2, "measure_heldout2", lambda *_: measured("docs_heldout2_"))
    monkeypatch.setattr(cli_docs.docs_heldout3, "measure_heldout3", lambda *_: measured("docs_heldout3_"))
    args = argparse.Namespace(no_docs=False, quick=True, docs_big_file_mb=0)
    config: Any = type("Config", (), {"threads": 1, "model_path": lambda self: None})()
    r = cli_docs.collect(args, config, lambda _: None, [])
    assert r["docs_heldout3_passages"] == 500 and r["docs_heldout2_passages"] == 500
    rows = cli_docs.report_rows(r, _row)
    assert rows[-1] == (
        "docs: third held-out set: keyword 0.5/0.75/0.6, paraphrase 0.4/0.75/0.6 "
        "(recall@1/@5/MRR, defaults; 17 files, 500 passages)"
    )
    assert rows[-2].startswith("docs: second held-out set: keyword 0.5/0.75/0.6")


def test_the_recall_and_fusion_benches_take_the_third_set_and_skip_it_when_absent() -> None:
    assert "heldout3" in docs_recall.CORPORA and "heldout3" in docs_recall.PROBLEMS
    assert docs_fusion.PROBLEMS is docs_recall.PROBLEMS
