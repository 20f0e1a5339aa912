"""`ember bench`'s serve rows on a tiny run: the API against the engine and llama-cpp-python's server."""

from __future__ import annotations

import argparse

import httpx
import pytest

from tests.bench import cli_serve as bench_serve
from tests.bench.suite import BenchConfig


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


def test_a_loopback_connection_that_is_refused_is_a_note_not_a_failed_bench(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*_args: object) -> dict[str, object]:
        raise httpx.ConnectError("zero-egress mode refused a connection to 127.0.0.1:5555")

    monkeypatch.setattr(bench_serve, "measure_serve", refused)
    notes: list[str] = []
    assert bench_serve.collect(argparse.Namespace(serve_runs=1, quick=True), BenchConfig(), lambda _: None, notes) == {}
    assert len(notes) == 1
    assert notes[0].startswith("ember serve: not measured (zero-egress mode refused a connection to 127.0.0.1:5555)")
    assert "ember network allow 127.0.0.1`" in notes[0]
