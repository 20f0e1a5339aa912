"""Greedy API turns give raw llama-cpp-python's greedy tokens (#40: `serve_greedy_match_rate`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.greedy_match import PROMPTS, measure


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_greedy_api_turns_match_raw_llama_cpp(smollm_path: Path) -> None:
    """Cold and warm KV cache, with and without prompt-lookup drafting (the full 20 prompts: the bench)."""
    result = measure(smollm_path, n=32, prompts=(PROMPTS[1], PROMPTS[7], PROMPTS[17]))
    assert result["drafted"] > 0  # drafting was exercised: its batches verified some tokens
    assert result["serve_greedy_match_rate"] == 1.0, result["rows"]
    assert result["serve_greedy_match_rate_no_drafting"] == 1.0, result["rows"]
    assert result["serve_greedy_match_rate_warm_cache"] == 1.0, result["rows"]
