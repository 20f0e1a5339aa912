"""`ember bench` runs and reports every field. Timings are never asserted: they are benchmarks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from desktop.cli.main import main
from engine.errors import BenchError
from tests.bench.__main__ import main as bench_main
from tests.bench.cli_long_chat import report_rows
from tests.bench.full import format_report, measure_gui
from tests.bench.llama import RunTiming, interleaved_rounds, rss_mb, summarize, summarize_native
from tests.bench.long_chat import _report  # pyright: ignore[reportPrivateUsage]
from tests.bench.native import NativePrompt, NativeRun, parse_llama_bench, prompt_ms
from tests.bench.suite import BenchConfig, cpu_name

ROOT = Path(__file__).resolve().parents[1]

REQUIRED = (
    "engine_vs_raw_tps_ratio", "engine_tps", "raw_tps", "ttft_ms", "engine_ttft_ms", "raw_ttft_ms",
    "filter_us_per_piece", "ui_max_stall_ms", "ui_p99_stall_ms", "ui_catchup_ms", "load_ms", "rss_mb",
    "history_search_ms", "cpu", "threads", "runs", "max_tokens", "outputs_match", "flash_attn", "notes",
    "vulkan_device", "vulkan_vs_cpu_tps_ratio", "build_seconds_cpu_only", "build_seconds_with_vulkan",
)  # fmt: skip
TINY = ["--threads", "1", "--runs", "1", "--max-tokens", "8", "--gui-tokens", "200",
        "--filter-bytes", "20000", "--history-messages", "200", "--long-chat-turns", "6", "--scale-messages", "60",
        "--no-docs",
        "--skip-decoding", "--serve-runs", "0",  # ember serve's rows: test_serve_bench.py
        "--download-mb", "4"]  # fmt: skip


@pytest.mark.slow
@pytest.mark.timeout(330)  # a hang guard, not a speed check: the tiny bench runs every measurement once
def test_a_tiny_bench_reports_every_field_and_never_loads_qt() -> None:
    code = (
        "import sys\nfrom tests.bench.__main__ import main\n"
        f"rc = main(['--json', *{TINY!r}])\n"
        "qt = sorted(m for m in sys.modules if m.split('.')[0] in ('PySide6', 'qasync', 'shiboken6'))\n"
        "print('QT', qt)\nsys.exit(rc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[-1] == "QT []"
    report: dict[str, Any] = json.loads(lines[-2])
    missing = [k for k in REQUIRED if k not in report]
    assert not missing
    assert report["engine_tps"] > 0 and report["raw_tps"] > 0 and report["engine_vs_raw_tps_ratio"] > 0
    assert report["engine_tokens"] == report["raw_tokens"] == 8 and report["outputs_match"]
    assert set(report["ttft_ms"]) == {"engine", "raw"}
    assert report["filter_us_per_piece"] > 0 and report["load_ms"] > 0 and report["rss_mb"] > 0
    assert report["history_search_ms"] is not None
    assert report["long_chat_turns"] == 6 and report["long_chat_ttft_turn5_ms"] > 0  # long chat (#16)
    assert report["long_chat_prompt_renders_per_turn"] >= 1 and report["long_chat_ttft_vs_native"] is None  # #23
    assert report["gui_open_2000_ms"] is not None and report["sidebar_5000_fill_ms"] is not None, report["notes"]
    assert report["download_vs_curl_ratio"] is None or report["download_vs_curl_ratio"] > 0  # None without curl
    if (ROOT / "tests" / "tools" / "stall_bench.py").is_file():
        assert report["ui_max_stall_ms"] is not None, report["notes"]


def test_a_model_that_is_not_there_is_one_readable_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    status = bench_main(["--model", str(tmp_path / "missing.gguf"), *TINY])
    assert status == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("ember: bench failed:") and "does not exist" in err[-1]


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
def test_a_template_that_asks_too_much_gives_embers_own_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import gguf_factory as gf

    model = gf.write_tiny_llama(tmp_path / "loop.gguf", "{% for i in range(10**9) %}x{% endfor %}" + gf.CHATML)
    assert bench_main(["--model", str(model), *TINY]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        "ember: bench failed: this model's chat template was stopped: it asked for a value too large to use (1e+09)"
    )


def _timing(tps: float, ttft: float, text: str = "same") -> RunTiming:
    return RunTiming(ttft_ms=ttft, tokens=11, decode_s=10 / tps, text=text)


def test_summary_is_medians_and_their_ratio() -> None:
    pairs = [
        (_timing(100, 50), _timing(110, 40)),
        (_timing(90, 60), _timing(99, 45)),
        (_timing(80, 70), _timing(96, 41)),
    ]
    s = summarize(pairs, max_tokens=11)
    assert s["raw_tps"] == 90 and s["engine_tps"] == 99
    assert s["engine_vs_raw_tps_ratio"] == 1.1
    assert s["ttft_ms"] == {"engine": 41, "raw": 60}
    assert s["runs"] == 3 and s["outputs_match"] and s["engine_tokens"] == 11


def test_differing_outputs_are_flagged() -> None:
    s = summarize([(_timing(100, 50, "a"), _timing(100, 50, "b"))], max_tokens=11)
    assert s["outputs_match"] is False


def test_llama_bench_json_gives_the_like_for_like_and_default_tg_figures() -> None:
    rows = [
        {"n_prompt": 64, "n_gen": 0, "flash_attn": 0, "avg_ts": 812.5, "build_commit": "abc123"},
        {"n_prompt": 0, "n_gen": 128, "flash_attn": 0, "avg_ts": 101.234, "stddev_ts": 1.5, "build_commit": "abc123"},
        {"n_prompt": 64, "n_gen": 0, "flash_attn": -1, "avg_ts": 900.0, "build_commit": "abc123"},
        {"n_prompt": 0, "n_gen": 128, "flash_attn": -1, "avg_ts": 120.0, "stddev_ts": 1.0, "build_commit": "abc123"},
    ]
    out = parse_llama_bench(json.dumps(rows), flash_attn="off")
    assert out["native_tg_tps"] == 101.23 and out["native_pp_tps"] == 812.5
    assert out["native_tg_default_tps"] == 120.0
    assert out["native_test"] == "tg128" and out["native_build"] == "abc123"


def test_llama_bench_without_the_asked_setting_is_an_error() -> None:
    rows = [{"n_prompt": 0, "n_gen": 128, "flash_attn": -1, "avg_ts": 120.0}]
    with pytest.raises(BenchError, match="no generation"):
        parse_llama_bench(json.dumps(rows), flash_attn="off")


def test_the_gui_part_can_be_skipped_and_reports_nulls() -> None:
    notes: list[str] = []
    out = measure_gui(0, 2000, notes)
    assert out["ui_max_stall_ms"] is None and out["ui_p99_stall_ms"] is None and out["ui_catchup_ms"] is None
    assert notes == ["GUI stall: skipped"]


def test_quick_is_smaller_than_full() -> None:
    full, quick = BenchConfig(), BenchConfig().quick()
    assert full.runs >= 5 and quick.runs < full.runs and quick.max_tokens < full.max_tokens


def test_machine_facts_are_readable() -> None:
    assert cpu_name() and rss_mb() > 0


def test_the_human_table_names_the_cpu_threads_and_every_figure() -> None:
    report: dict[str, Any] = {
        "model": "m.gguf", "cpu": "Test CPU 9000", "threads": 2, "logical_cpus": 2, "load_average": 0.2,
        "llama_cpp_python": "0.3.36", "python": "3.11", "platform": "Linux",
        "engine_tps": 120.0, "raw_tps": 100.0, "engine_ttft_ms": 40.0, "raw_ttft_ms": 45.0,
        "engine_tokens": 128, "raw_tokens": 128, "engine_vs_raw_tps_ratio": 1.2, "pairwise_ratio_median": 1.19,
        "runs": 7, "max_tokens": 128, "outputs_match": True, "native_tg_tps": 130.0, "native_test": "tg128",
        "native_flash_attn": "off", "native_pairwise_ratio_median": 0.925, "where": "CPU · no GPU found",
        "engine_vs_native_tps_ratio": 0.923, "filter_us_per_piece": 1.5, "filter_bytes": 1_000_000,
        "ui_max_stall_ms": None, "ui_p99_stall_ms": None, "ui_catchup_ms": None, "ui_tokens": 20_000,
        "ui_tokens_per_s": 2000, "load_ms": 300.0, "import_ms": 500.0, "rss_mb": 200.0,
        "rss_after_first_token_mb": 210.0, "history_search_ms": 12.5, "history_messages": 10_000,
        "notes": ["GUI stall: skipped"], "cpu_variant": "haswell", "vulkan_device": "llvmpipe (software)",
        "vulkan_vs_cpu_tps_ratio": 0.412, "build_seconds_cpu_only": 582, "build_seconds_with_vulkan": None,
    }  # fmt: skip
    text = format_report(report)
    assert "llvmpipe (software); decode x0.412 the CPU's; build n/a s with it, 582.0 s CPU only" in text
    assert "Test CPU 9000" in text and "2 threads" in text
    figures = (
        "120.0",
        "100.0",
        "1.200",
        "tg128",
        "130.0",
        "0.923",
        "0.925",
        "CPU · no GPU found",
        "1.50 µs",
        "n/a",
        "300 ms",
        "200 MB",
        "12.50 ms",
    )
    for figure in figures:
        assert figure in text, figure
    assert "note: GUI stall: skipped" in text


def test_rounds_interleave_every_side_and_rotate_who_goes_first() -> None:
    order: list[str] = []

    def side(name: str):  # type: ignore[no-untyped-def]
        def run() -> str:
            order.append(name)
            return name

        return run

    rounds = list(interleaved_rounds([side("raw"), side("engine"), side("native")], 3))
    assert rounds == [["raw", "engine", "native"]] * 3  # results always in side order
    assert order == ["raw", "engine", "native", "engine", "native", "raw", "native", "raw", "engine"]


def test_native_figures_are_the_median_and_the_ratio_at_the_same_depth() -> None:
    pairs = [(_timing(95, 40), 100.0), (_timing(99, 40), 110.0), (_timing(90, 40), 90.0)]
    out = summarize_native(pairs)
    assert out["native_tg_tps"] == 100.0 and out["engine_vs_native_tps_ratio"] == 0.95
    assert out["native_tg_runs"] == [100.0, 110.0, 90.0] and out["native_pairwise_ratio_median"] == 0.95


def test_the_native_run_matches_embers_settings(tmp_path: Path) -> None:
    run = NativeRun(
        tmp_path / "llama-bench", tmp_path / "m.gguf", threads=2, n_gen=128, depth=37, flash_attn="on", n_gpu_layers=-1
    )
    cmd = run.command()
    for flag, value in (
        ("-d", "37"),
        ("-n", "128"),
        ("-p", "0"),
        ("-t", "2"),
        ("-ngl", "99"),
        ("-fa", "on"),
        ("-r", "1"),
    ):
        assert cmd[cmd.index(flag) + 1] == value, flag
    cpu = NativeRun(tmp_path / "llama-bench", tmp_path / "m.gguf", threads=2, n_gen=8, depth=5, n_gpu_layers=0)
    assert cpu.command()[cpu.command().index("-ngl") + 1] == "0"


def test_the_native_prompt_run_reads_the_same_tokens_at_the_same_depth(tmp_path: Path) -> None:
    run = NativePrompt(tmp_path / "llama-bench", tmp_path / "m.gguf", threads=1, flash_attn="on")
    cmd = run.command(36, 1750)
    for flag, value in (("-p", "36"), ("-n", "0"), ("-d", "1750"), ("-t", "1"), ("-fa", "on"), ("-ngl", "0")):
        assert cmd[cmd.index(flag) + 1] == value, flag
    rows = [{"n_prompt": 36, "n_gen": 0, "n_depth": 1750, "avg_ns": 480_000_000, "avg_ts": 75.0}]
    assert prompt_ms(json.dumps(rows), 36) == 480.0
    assert prompt_ms(json.dumps([{"n_prompt": 36, "n_gen": 0, "avg_ts": 72.0}]), 36) == 500.0  # no avg_ns
    with pytest.raises(BenchError, match="pp36"):
        prompt_ms(json.dumps([{"n_prompt": 0, "n_gen": 1, "avg_ts": 50.0}]), 36)


def test_the_long_chat_reports_renders_and_the_native_ratio_as_medians_of_five_turns_at_each_end() -> None:
    rows = [
        {"ttft_ms": 100.0, "prompt": 80, "evaluated": 30, "sent": 3, "dropped": 0, "depth": 50.0 * t, "renders": 1}
        for t in range(1, 13)
    ]
    for turn, (ember, native) in zip(range(2, 7), [(100, 80), (90, 80), (700, 80), (110, 90), (100, 70)], strict=True):
        rows[turn - 1] |= {"ttft_ms": float(ember), "native_ms": float(native)}  # one outlier: 700 ms
    for turn in range(8, 13):
        rows[turn - 1] |= {"ttft_ms": 300.0, "native_ms": 250.0, "renders": 3}
    out = _report(rows, 2048, 12, 2)
    assert out["long_chat_prompt_renders_per_turn"] == 1.83 and out["long_chat_prompt_renders_max"] == 3
    assert out["long_chat_ttft_vs_native_turn5"] == 1.25  # median 100 over median 80: the outlier does not count
    assert out["long_chat_ttft_vs_native"] == 1.2 and out["long_chat_native_turns_compared"] == 10
    assert (out["long_chat_depth_turn5"], out["long_chat_depth_last_turn"]) == (100, 600)
    assert out["long_chat_window_moves"] == 0 and out["long_chat_evaluated_on_moves_max"] is None
    for row in rows[7:]:
        del row["native_ms"]
    assert _report(rows, 2048, 12, 2)["long_chat_ttft_vs_native"] is None  # no llama-bench: no ratio


def test_the_long_chat_reports_what_a_window_move_evaluated_and_what_the_shift_kept() -> None:
    rows = [
        {"ttft_ms": 100.0, "prompt": 80, "evaluated": 30, "sent": 3, "dropped": 0, "depth": 50.0, "renders": 1}
        for _ in range(12)
    ]
    for turn in range(6, 13):
        rows[turn - 1]["dropped"] = 2 if turn < 10 else 4  # the window moves at turns 6 and 10
    rows[5] |= {"evaluated": 34, "shifted": 1350}
    rows[9] |= {"evaluated": 1400, "shifted": 0}  # a refill: the cache could not shift
    out = _report(rows, 2048, 12, 2)
    assert out["long_chat_window_moves"] == 2
    assert out["long_chat_evaluated_on_moves_max"] == 1400 and out["long_chat_shifted_tokens"] == 1350
    lines = report_rows(out, lambda label, value: f"{label}: {value}")
    assert "window moves: 2, at most 1400 tokens evaluated on one (1,350 kept by shifting the KV cache)" in lines


def test_a_bad_gpu_layer_count_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "--gpu-layers", "-5"])
    assert exit_info.value.code == 2 and "layer count" in capsys.readouterr().err
