"""`ember bench`'s serve rows on a tiny run: the API against the engine and llama-cpp-python's server."""

from __future__ import annotations

import argparse

import httpx
import pytest

from tests.bench import cli_serve as bench_serve
from tests.bench.llama import RunTiming
from tests.bench.suite import BenchConfig


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_the_serve_rows_are_measured_side_by_side() -> None:
    notes: list[str] = []
    config = BenchConfig(runs=1, max_tokens=6, threads=1)
    args = argparse.Namespace(serve_runs=1, quick=True)
    report = bench_serve.collect(args, config, lambda _: None, notes)
    assert report["serve_vs_engine_tps_ratio"] > 0 and report["serve_32_clients_total_tps"] > 0
    assert report["serve_8_clients_total_tps"] > 0
    assert report["serve_outputs_match"] and report["serve_ttft_overhead_ms"] is not None
    assert report["serve_vs_llama_cpp_server_tps_ratio"] is not None, notes  # the server extra is a dev dependency
    assert report["serve_ttft_vs_llama_cpp_server_ratio"] > 0
    rows = "\n".join(bench_serve.report_rows(report, lambda label, value: f"{label}: {value}"))
    assert "ember serve, 32 clients" in rows and "ember serve, 8 clients" in rows
    assert "llama-cpp-python's server" in rows and "first token" in rows
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


def test_the_ttft_ratio_is_embers_median_over_the_servers() -> None:
    # Each round: the engine, ember serve cold, llama-cpp-python's server, ember serve warm.
    engine, cold = RunTiming(100, 9, 1.0, "a"), RunTiming(700, 9, 1.0, "a")
    rounds = [
        [engine, cold, RunTiming(200, 9, 2.0, "a"), RunTiming(110, 9, 1.0, "a")],
        [engine, cold, RunTiming(240, 9, 2.0, "a"), RunTiming(130, 9, 1.0, "a")],
        [engine, cold, RunTiming(9000, 9, 2.0, "a"), RunTiming(150, 9, 1.0, "a")],  # an outlier
    ]
    out = bench_serve.summarize(rounds, has_llama=True)
    assert out["serve_ttft_vs_llama_cpp_server_ratio"] == 0.542  # warm 130 ms over 240 ms, not the cold 700
    assert out["serve_vs_llama_cpp_server_tps_ratio"] == 2.0 and out["serve_outputs_match_llama_cpp_server"]
    assert out["serve_ttft_overhead_ms"] == 600  # cold serve against the (cold) engine
    assert (
        bench_serve.summarize([r[:2] for r in rounds], has_llama=False)["serve_ttft_vs_llama_cpp_server_ratio"] is None
    )


class _Exited:
    """A child that has already exited: the bench notes it and goes on without the server."""

    stderr = None

    def poll(self) -> int:
        return 1

    def terminate(self) -> None:
        pass

    def wait(self, timeout: float | None = None) -> int:
        return 1


@pytest.mark.parametrize(("mode", "flag"), [("on", "True"), ("off", "False")])
def test_llama_cpp_server_gets_embers_flash_attention_threads_and_batch(
    monkeypatch: pytest.MonkeyPatch, mode: str, flag: str
) -> None:
    started: list[list[str]] = []

    def popen(argv: list[str], **_kwargs: object) -> _Exited:
        started.append(argv)
        return _Exited()

    monkeypatch.setattr(bench_serve.subprocess, "Popen", popen)
    notes: list[str] = []
    with bench_serve._llama_cpp_server(BenchConfig(n_ctx=256), 3, mode, notes) as url:  # pyright: ignore[reportPrivateUsage]
        assert url is None
    argv = started[0]
    options = dict(zip(argv[argv.index("--model") :: 2], argv[argv.index("--model") + 1 :: 2], strict=False))
    assert options["--flash_attn"] == flag
    assert (options["--n_threads"], options["--n_threads_batch"], options["--n_batch"]) == ("3", "3", "256")
    assert "did not start" in notes[0]
