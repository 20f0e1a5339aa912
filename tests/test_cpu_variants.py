"""llama.cpp's CPU variants chosen at run time: the best-scored variant whose child decodes is
taken (a trapping one is skipped, no speed race), the choice is cached per machine, and the real
build loads one that runs."""

from __future__ import annotations

import functools
import logging
import sys
import time
from pathlib import Path

import pytest

from engine.errors import ModelLoadError
from engine.llama import cpu, machine_cache
from engine.llama.cpu import Choice, Probe
from tests import cpu_fakes

INFO = "CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | AVX512 = 1 | OPENMP = 1 |"
FAKE_SCORE, FAKE_PROBE = "tests.cpu_fakes:score", "tests.cpu_fakes:probe"  # in child processes


def _variants(folder: Path, *names: str) -> dict[str, Path]:
    for name in names:
        (folder / f"libggml-cpu-{name}.so").write_bytes(b"\x7fELF")
    return cpu.variant_files(folder)


def test_variant_and_backend_files_are_told_apart(tmp_path: Path) -> None:
    for name in (
        "libggml.so",
        "libggml-base.so",
        "libggml-base.so.0",
        "libggml-cuda.so",
        "libllama.so",
        "libggml-cpu-haswell.so",
        "libggml-cpu-armv8.2_1.so",
        "libggml-cpu-haswell.so.0",
        "readme.txt",
    ):
        (tmp_path / name).write_bytes(b"")
    assert list(cpu.variant_files(tmp_path)) == ["armv8.2_1", "haswell"]
    assert [p.name for p in cpu.other_backend_files(tmp_path)] == ["libggml-cuda.so"]
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "libggml-cpu.so").write_bytes(b"")  # the CPU backend built in: no variant
    assert cpu.variant_files(tmp_path / "one") == {}
    assert cpu.variant_files(tmp_path / "missing") == {}


@pytest.mark.slow  # starts a process or uses the real model (tests/slow_marks.py)
def test_a_variant_that_traps_is_skipped_with_a_log_line_and_the_next_best_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    files = _variants(tmp_path, *cpu_fakes.SCORES)
    choice = cpu.choose(files, None, score_child=FAKE_SCORE, probe_child=FAKE_PROBE)
    by_name = {p.name: p for p in choice.probes}
    assert by_name["broken"].runs is False and by_name["broken"].detail == "died of SIGILL while loading"
    assert by_name["sapphirerapids"].runs is False
    assert by_name["sapphirerapids"].detail == "died of SIGILL while decoding"
    # zen4 is the best-scored that decodes: taken, and nothing below it is probed (no speed race).
    assert choice.chosen == "zen4" and by_name["zen4"].runs is True
    assert all(by_name[n].runs is None and "not probed" in by_name[n].detail for n in ("icelake", "haswell", "x64"))
    assert [p.name for p in choice.skipped] == ["sapphirerapids", "broken"]
    line = cpu.chosen_line(choice, frozenset({"avx2", "avx512f", "amx_int8"}))
    assert line.startswith("CPU variant: zen4 (x86-64 SSE3 AVX AVX2 AVX512), chosen at run time from 6 (probed)")
    assert "sapphirerapids (died of SIGILL while decoding)" in line and line.endswith("AMX_INT8, unused")
    # What the app does with it: the skipped trap is logged once, the choice cached for this machine.
    monkeypatch.setenv(machine_cache.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(cpu, "choose", lambda files, model: choice)
    with caplog.at_level(logging.INFO, logger="engine.llama"):
        assert cpu._decide(files, None) is choice  # pyright: ignore[reportPrivateUsage]
    assert "llama.cpp CPU variant sapphirerapids skipped: died of SIGILL while decoding" in caplog.text
    monkeypatch.setattr(cpu, "choose", lambda files, model: pytest.fail("probed again"))
    cached = cpu._decide(files, None)  # pyright: ignore[reportPrivateUsage]
    assert cached.chosen == "zen4" and cached.probes == choice.probes and "cached" in cached.how


def test_no_variant_that_runs_is_one_line_and_loads_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    dead = Choice(
        None,
        cpu.PROBED,
        (
            Probe("haswell", 50, False, detail="died of SIGILL while decoding"),
            Probe("x64", 1, False, detail="died of SIGBUS while decoding"),
        ),
    )
    monkeypatch.setattr(cpu, "ensure_backends", lambda model=None: dead)
    with pytest.raises(ModelLoadError) as err:
        cpu.ensure_cpu_runs()
    message = str(err.value)
    assert "\n" not in message and message.startswith("no llama.cpp CPU variant runs on this CPU")
    assert "haswell: died of SIGILL while decoding" in message and "-DGGML_BACKEND_DL=OFF" in message


@pytest.mark.slow  # starts a process or uses the real model (tests/slow_marks.py)
def test_a_probe_that_cannot_tell_is_not_cached_and_a_forced_variant_is_probed_in_a_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _variants(tmp_path, "haswell", "x64")
    monkeypatch.setenv(machine_cache.CACHE_ENV, str(tmp_path / "cache"))
    unsure = Choice(None, cpu.PROBED, (Probe("haswell", 50, None, detail="the probe did not finish in 180 s"),))
    monkeypatch.setattr(cpu, "choose", lambda files, model: unsure)
    cpu._decide(files, None)  # pyright: ignore[reportPrivateUsage]
    assert not (tmp_path / "cache" / cpu.CACHE_FILE).exists()
    monkeypatch.setattr(cpu, "probe_variant", functools.partial(cpu.probe_variant, child=FAKE_PROBE))
    monkeypatch.setenv(cpu.FORCE_ENV, "x64")
    forced = cpu._decide(files, None)  # pyright: ignore[reportPrivateUsage]
    assert forced.chosen == "x64" and forced.how == "forced by EMBER_CPU_VARIANT" and not forced.refused
    assert forced.probes[0].runs is True  # its child decoded
    monkeypatch.setenv(cpu.FORCE_ENV, "nonesuch")  # a typo is a warning, then a normal choice
    assert cpu._decide(files, None) is unsure  # pyright: ignore[reportPrivateUsage]


@pytest.mark.slow
def test_a_hung_score_child_skips_that_variant_without_calling_it_a_trap(tmp_path: Path) -> None:
    files = _variants(tmp_path, "haswell")
    probes = cpu.read_scores(files, sys.executable, "tests.cpu_fakes:hang_while_scoring", timeout=1.0)
    assert [(p.name, p.runs) for p in probes] == [("haswell", None)]


@pytest.mark.slow
def test_the_real_build_loads_a_variant_that_runs_here(smollm_path: Path) -> None:
    choice = cpu.ensure_backends(smollm_path)
    if choice is None or choice.chosen is None:
        pytest.skip("this llama.cpp build has its CPU backend built in (no run-time variants)")
    chosen = choice.probe(choice.chosen)
    assert chosen is not None and choice.chosen in cpu.variant_files(cpu.lib_dir())
    assert chosen.runs is not False  # it decoded in its child (None: another process probed it)
    if "avx2" in cpu.cpu_flags() and chosen.features:
        assert "AVX2" in chosen.features  # this CPU runs at least the portable level
    assert cpu.ensure_cpu_runs().runs in (True, None)


@pytest.mark.slow
def test_the_bench_compares_the_chosen_variant_with_the_avx2_one(smollm_path: Path) -> None:
    from engine.child_env import child_env
    from tests.bench.cpu_variant import PORTABLE, compare_variants

    choice = cpu.ensure_backends(smollm_path)
    report = compare_variants(smollm_path, 1, 1, child_env())
    if choice is None or choice.chosen is None or "avx2" not in cpu.cpu_flags():
        assert report["default_vs_portable_tps_ratio"] is None
        return
    assert report["cpu_variant"] == choice.chosen and report["cpu_variants_built"] >= 2
    assert PORTABLE in cpu.variant_files(cpu.lib_dir())
    for row in ("default_vs_portable_tps_ratio", "default_vs_portable_pp_ratio"):
        assert report[row] > 0  # each side's child ran its own variant (measure_variant checks it)


@pytest.mark.slow
def test_hung_probes_share_one_time_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = _variants(tmp_path, "zen4", "icelake", "haswell")
    monkeypatch.setattr(cpu, "PROBE_TIMEOUT_S", 1.5)
    started = time.monotonic()
    choice = cpu.choose(files, None, score_child=FAKE_SCORE, probe_child="tests.cpu_fakes:hang")
    assert time.monotonic() - started < 10  # not three full limits, and never the 30 s hang
    assert all(p.runs is None for p in choice.probes)
    assert "limit" in choice.probes[0].detail and choice.probes[-1].detail == cpu.OUT_OF_TIME
    # the model still loads on a machine too busy to probe: on the most portable variant, unproven
    assert choice.chosen == "haswell" and choice.how == cpu.UNPROVEN
    assert [p.name for p in choice.skipped] == [choice.probes[0].name]  # the one tried, not those never probed
