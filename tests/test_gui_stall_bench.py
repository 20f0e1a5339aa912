"""The GUI stall bench runs and reports its figures (timings are never asserted)."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QApplication

from tests.tools.stall_bench import bench_tokens, measure_ui_stall


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
def test_measure_ui_stall_runs_and_returns_its_keys(qapp: QApplication) -> None:
    result = measure_ui_stall(n_tokens=300, tokens_per_s=3000, line_chars=100_000)
    assert {
        "ui_max_stall_ms",
        "ui_p99_stall_ms",
        "ui_catchup_ms",
        "ui_card_line_max_stall_ms",
        "ui_paste_line_max_stall_ms",
        "ui_send_line_max_stall_ms",
    } <= result.keys()
    assert all(isinstance(v, float) and v >= 0 for v in result.values())


def test_bench_tokens_are_markdown_with_thinking() -> None:
    tokens = bench_tokens(2000)
    assert len(tokens) == 2000
    text = "".join(tokens)
    assert text.startswith("<think>") and "</think>" in text
    assert "```python" in text and "## Section" in text
