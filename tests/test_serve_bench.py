"""`ember bench`'s serve rows on a tiny run: the API against the engine and llama-cpp-python's server."""

from __future__ import annotations

import argparse

import pytest

from desktop.cli import bench_serve
from engine.bench.suite import BenchConfig


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_the_serve_rows_are_measured_side_by_side() -> None:
    notes: list[str] = []
    config = BenchConfig(runs=1, max_tokens=6, threads=1)
    args = argparse.Namespace(serve_runs=1, quick=True)
    report = bench_serve.collect(args, config, lambda _: None, notes)
    assert report["serve_vs_engine_tps_ratio"] > 0 and report["serve_32_clients_total_tps"] > 0
    assert report["serve_outputs_match"] and report["serve_ttft_overhead_ms"] is not None
    assert report["serve_vs_llama_cpp_server_tps_ratio"] is not None, notes  # the server extra is a dev dependency
    rows = "\n".join(bench_serve.report_rows(report, lambda label, value: f"{label}: {value}"))
    assert "ember serve, 32 clients" in rows and "llama-cpp-python's server" in rows
    assert bench_serve.collect(argparse.Namespace(serve_runs=0, quick=True), config, lambda _: None, notes) == {}
