"""`ember bench` without flags: this model's speed here, in well under a minute (issue #41).

Timings are never asserted (they are benchmarks); the report's shape and its sense are.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from desktop.cli import cmd_bench
from desktop.cli.main import main

DEFAULT_KEYS = ("model", "cpu", "threads", "load_average", "load_ms", "prompt_tokens", "engine_ttft_ms",
                "engine_pp_tps", "engine_tps", "bench_default_seconds", "notes")  # fmt: skip


@pytest.mark.slow
@pytest.mark.timeout(300)  # a hang guard, not a speed check
def test_the_default_bench_reports_this_models_speed(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")  # no llama-bench: the native line is left out, not failed
    # One thread: two spin at llama.cpp's barrier against the other xdist worker (engine/llama/cpu_threads.py).
    assert main(["bench", "--json", "--threads", "1"]) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [k for k in DEFAULT_KEYS if k not in report] == []
    assert report["prompt_tokens"] > 100 and report["engine_pp_tps"] > 0 and report["engine_tps"] > 0
    assert report["engine_ttft_ms"] > 0 and report["bench_default_seconds"] > 0
    assert report["native_tg_tps"] is None if "native_tg_tps" in report else True
    assert not [k for k in report if k.startswith("builtin_fast")]  # no first-start conversion any more
    assert "raw_tps" not in report  # the raw comparison is --full's


def test_the_table_names_each_figure() -> None:
    report = {
        "model": "m.gguf",
        "cpu": "c",
        "threads": 2,
        "load_average": 1.0,
        "load_average_end": 1.5,
        "engine_pp_tps": 200.0,
        "prompt_tokens": 250,
        "engine_tps": 60.0,
        "engine_ttft_ms": 1250.0,
        "load_ms": 300,
        "native_tg_tps": 70.0,
        "native_pp_tps": 230.0,
        "engine_vs_native_tps_ratio": 0.857,
        "bench_default_seconds": 12.5,
        "notes": ["a note"],
    }
    text = cmd_bench.format_report(report)
    assert "prompt reading      200.0 tokens/s (250-token prompt)" in text
    assert "Ember / native decoding 0.857" in text and "answered in 12.5 s" in text
    assert text.splitlines()[-1] == "note: a note"


@pytest.mark.parametrize("flag", ["--full", "--llama-bench"])
def test_ember_bench_is_the_quick_bench_only(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:  # the comparisons are `python -m tests.bench`
        main(["bench", flag, "/bin/sh"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and flag in err


def test_the_product_never_imports_tests() -> None:
    root = Path(cmd_bench.__file__).resolve().parents[2]
    offenders = []
    for package in ("desktop", "engine", "models"):
        for path in (root / package).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            if "tests" not in text:  # no import of it can be here: parsing every file took seconds of CPU
                continue
            for node in ast.walk(ast.parse(text)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                offenders += [f"{path.relative_to(root)}: {n}" for n in names if n.split(".")[0] == "tests"]
    assert offenders == []


def test_the_comparisons_want_a_llama_bench_beside_the_quick_bench(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.bench.__main__ import main as bench_main

    assert bench_main(["--beside-quick"]) == 2
    assert capsys.readouterr().err == "--beside-quick needs --llama-bench PATH\n"


def _fake_llama_bench(tmp_path: Path, rows: list[dict[str, Any]], status: int = 0) -> Path:
    binary = tmp_path / "llama-bench"
    binary.write_text(f"#!/bin/sh\necho '{json.dumps(rows)}'\necho 'it broke' >&2\nexit {status}\n")
    binary.chmod(0o755)
    return binary


@pytest.mark.slow  # starts a process or uses the real model (tests/slow_marks.py)
def test_native_beside_the_default_run_is_its_figures_and_embers_ratio(tmp_path: Path) -> None:
    from tests.bench.native import beside_quick

    rows = [
        {"n_prompt": 64, "n_gen": 0, "flash_attn": -1, "avg_ts": 230.0},
        {"n_prompt": 0, "n_gen": 64, "flash_attn": -1, "avg_ts": 80.0, "build_commit": "abc"},
    ]
    notes: list[str] = []
    out = beside_quick(_fake_llama_bench(tmp_path, rows), tmp_path / "m.gguf", 2, {"engine_tps": 60.0}, notes, 64)
    assert out["native_tg_tps"] == 80.0 and out["native_pp_tps"] == 230.0
    assert out["engine_vs_native_tps_ratio"] == 0.75 and notes == []


@pytest.mark.slow  # starts a process or uses the real model (tests/slow_marks.py)
def test_a_failing_llama_bench_is_a_note_not_a_failed_bench(tmp_path: Path) -> None:
    from tests.bench.native import beside_quick

    notes: list[str] = []
    out = beside_quick(
        _fake_llama_bench(tmp_path, [], status=3), tmp_path / "m.gguf", 2, {"engine_tps": 60.0}, notes, 64
    )
    assert out == {"native_tg_tps": None, "engine_vs_native_tps_ratio": None}
    assert notes == ["llama-bench: llama-bench failed (3): it broke"]


def test_the_product_carries_no_bench_comparisons() -> None:
    root = Path(cmd_bench.__file__).resolve().parents[2]
    shipped = {p.name for p in (root / "engine" / "bench").glob("*.py")}
    assert shipped == {"__init__.py", "quick.py"}  # native llama-bench is tests/bench/native.py
    assert not list((root / "desktop" / "cli").glob("bench_*.py"))
