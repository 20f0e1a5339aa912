"""`ember bench`'s speculative-decoding and KV-cache figures, on tiny runs of SmolLM2."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.child_env import child_env
from tests.bench import speculative as bench_spec


@pytest.mark.slow
@pytest.mark.timeout(300)  # a dozen prompt evaluations: over a minute on this shared machine
def test_the_prompt_lookup_figures_come_from_identical_replies(smollm_path: Path) -> None:
    from engine.llama.llama import LlamaBackend

    backend = LlamaBackend(smollm_path, n_ctx=1024, n_threads=1)
    try:
        report = bench_spec.measure_speculative(backend, runs=1, max_tokens=8)
    finally:
        backend.close()
    assert report["spec_lookup_outputs_match"] and report["spec_chat_outputs_match"]
    assert report["spec_lookup_speedup"] > 0 and report["spec_chat_ratio"] > 0
    assert report["spec_lookup_drafted"] > 0 and report["spec_acceptance_rate"] is not None
    assert report["spec_lookup_tokens"] == 16


@pytest.mark.slow
def test_the_kv_cache_types_are_compared_side_by_side(smollm_path: Path) -> None:
    report = bench_spec.compare_kv(smollm_path, threads=1, runs=1, max_tokens=4, gpu_layers=0, kinds=("f16", "q8_0"))
    assert report["kv_f16_tps"] > 0 and report["kv_q8_0_vs_f16_tps_ratio"] > 0


@pytest.mark.slow
def test_a_q8_0_cache_holds_less_memory_than_f16(smollm_path: Path) -> None:
    out = bench_spec.measure_kv_memory(smollm_path, 1, 0, child_env(), kinds=("f16", "q8_0"))
    assert out["kv_context"] == 4096
    assert 0 < out["kv_q8_0_rss_mb"] < out["kv_f16_rss_mb"]
