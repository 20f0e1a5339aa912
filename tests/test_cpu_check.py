"""The llama.cpp CPU probe: a build this CPU traps on is refused in one line, and cached."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from engine.errors import ModelLoadError
from engine.llama import cpu, machine_cache
from engine.llama.process_state import PROCESS, LlamaProcess

INFO = (
    "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | "
    "AVX512 = 0 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 |"
)
OLD_CPU = "processor\t: 0\nflags\t\t: fpu sse sse2 pni ssse3 sse4_1 sse4_2 avx\n"  # no AVX2, FMA, F16C, BMI2
NEW_CPU = "flags\t\t: fpu pni ssse3 avx avx2 f16c fma bmi2 avx512f avx512_vnni amx_int8\n"
TRAP = f"import os, signal\nprint('features: {INFO}', flush=True)\nos.kill(os.getpid(), signal.SIGILL)\n"


def test_the_build_and_the_cpu_are_read_and_compared() -> None:
    features = cpu.build_features(INFO)
    assert features == ("SSE3", "SSSE3", "AVX", "AVX2", "F16C", "FMA", "BMI2")
    old, new = cpu.cpu_flags(OLD_CPU), cpu.cpu_flags(NEW_CPU)
    assert cpu.missing(features, old) == ["AVX2", "F16C", "FMA", "BMI2"]
    assert cpu.missing(features, new) == []
    line = cpu.variant_line(features, new)
    assert line.startswith("CPU variant: x86-64 SSE3 SSSE3 AVX AVX2 F16C FMA BMI2")
    assert line.endswith("this CPU also has AVX512 AVX512_VNNI AMX_INT8, unused")
    assert cpu.cpu_flags("no flags here") == frozenset()


@pytest.fixture
def one_variant(monkeypatch: pytest.MonkeyPatch, fresh_llama: LlamaProcess) -> None:
    """A build with its CPU backend built in (no run-time variants), in a new process: the one
    build is probed."""
    monkeypatch.setattr(cpu, "ensure_backends", lambda model=None: None)


@pytest.mark.usefixtures("one_variant")
@pytest.mark.slow  # starts a process or uses the real model (tests/slow_marks.py)
def test_a_trapping_build_is_refused_in_one_line_and_the_verdict_is_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_llama: LlamaProcess
) -> None:
    monkeypatch.setenv(machine_cache.CACHE_ENV, str(tmp_path))
    old = cpu.cpu_flags(OLD_CPU)
    monkeypatch.setattr(cpu, "cpu_flags", lambda cpuinfo=None: old)  # this machine, an older CPU
    with pytest.raises(ModelLoadError) as err:
        cpu.ensure_cpu_runs(command=[sys.executable, "-c", TRAP])
    message = str(err.value)
    assert "\n" not in message
    assert "uses AVX2, F16C, FMA, BMI2, which this CPU lacks" in message
    assert "SIGILL" in message and "uv sync --reinstall-package llama-cpp-python" in message
    # Cached on disk: a new process (an empty in-memory table) refuses without probing again.
    fresh_llama.reset()
    with pytest.raises(ModelLoadError):
        cpu.ensure_cpu_runs(command=[sys.executable, "-c", "raise SystemExit('must not run')"])
    assert (tmp_path / cpu.CACHE_FILE).is_file()


@pytest.mark.usefixtures("one_variant")
@pytest.mark.slow  # starts a process or uses the real model (tests/slow_marks.py)
def test_a_probe_that_cannot_tell_refuses_nothing_and_is_not_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(machine_cache.CACHE_ENV, str(tmp_path))
    verdict = cpu.ensure_cpu_runs(command=[sys.executable, "-c", "import sys; sys.exit('no llama here')"])
    assert verdict.runs is None and "no llama here" in verdict.detail
    assert not (tmp_path / cpu.CACHE_FILE).exists()
    hung = cpu.probe([sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.5)
    assert hung.runs is None and "did not finish" in hung.detail


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.slow  # starts a process or uses the real model (tests/slow_marks.py)
def test_a_probe_killed_by_a_signal_python_does_not_name_is_a_trap_not_a_crash() -> None:
    # 40 is a real-time signal: signal.Signals has no name for it (naming it raised ValueError).
    died = cpu.probe([sys.executable, "-c", "import os; os.kill(os.getpid(), 40)"])
    assert died.runs is False and died.detail == "the probe died of signal 40 while decoding"
    trapped = cpu.probe([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGILL)"])
    assert trapped.detail == "the probe died of SIGILL while decoding"


@pytest.mark.slow
def test_the_real_build_passes_its_probe_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, smollm_path: Path
) -> None:
    monkeypatch.setenv(machine_cache.CACHE_ENV, str(tmp_path))
    # Only the built-in build's verdict is forgotten: the variant and GPU loaded here stay loaded.
    monkeypatch.setattr(PROCESS, "builtin_probe", None)
    verdict = cpu.ensure_cpu_runs(smollm_path)  # the one build, or the variant chosen here
    assert verdict.runs is True and verdict.detail == "passed"
    if "avx2" in cpu.cpu_flags():  # the portable x86-64 build uses it
        assert "AVX2" in verdict.features
