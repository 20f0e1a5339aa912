"""The CPU-variant cache is an input like any other (adversarial review 2: CV-02, CV-06, CV-07).

It is checked against the build's variants and its own schema; a cached variant llama.cpp
refuses to load is measured again instead of failing every model load; a forced one that
cannot run says so in one line instead of blaming the model file.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engine.errors import ModelLoadError
from engine.llama import cpu, llama_log, machine_cache
from engine.llama.cpu import CACHE_FILE, Choice, Probe
from engine.llama.process_state import LlamaProcess

PROBE_VARIANT = cpu.probe_variant
MEASURED = Choice("zen4", cpu.PROBED, (Probe("zen4", 90, True), Probe("sapphirerapids", 99, False)))


class _FakeGgml:
    """llama.cpp's loader: refuses the variants this CPU cannot run, as ggml_backend_load does."""

    def __init__(self, refuses: set[str]) -> None:
        self.refuses = refuses
        self.loaded: list[str] = []

    def ggml_backend_reg_count(self) -> int:
        return 0

    def ggml_backend_load(self, path: bytes) -> int:
        name = Path(path.decode()).name.removeprefix("libggml-cpu-").removesuffix(".so")
        if name in self.refuses:
            return 0
        self.loaded.append(name)
        return 1


@pytest.fixture
def build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_llama: LlamaProcess) -> dict[str, Path]:
    folder = tmp_path / "lib"
    folder.mkdir()
    for name in ("x64", "zen4", "sapphirerapids"):
        (folder / f"libggml-cpu-{name}.so").write_bytes(b"\x7fELF")
    monkeypatch.setenv(machine_cache.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(cpu.FORCE_ENV, raising=False)
    monkeypatch.setattr(cpu, "lib_dir", lambda: folder)
    monkeypatch.setattr(llama_log, "install", lambda: None)
    return cpu.variant_files(folder)


def _cache(files: dict[str, Path], entry: object) -> Path:
    path = machine_cache.cache_dir() / CACHE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({cpu.machine_key(files.values()): entry}), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "entry",
    [
        {"chosen": "../../x", "probes": []},  # CV-07: a name this build lacks
        {"chosen": ["zen4"], "probes": []},
        {"chosen": "zen4", "probes": "all"},
        {"chosen": "zen4", "probes": [{"name": "zen4", "score": "high"}]},
        {"chosen": "zen4", "probes": [{"name": "zen4", "score": 9, "runs": "yes"}]},
    ],
)
def test_a_cache_that_does_not_fit_the_build_is_measured_again(
    build: dict[str, Path], entry: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    _cache(build, entry)
    monkeypatch.setattr(cpu, "choose", lambda files, model: MEASURED)
    assert cpu._decide(build, None) is MEASURED  # pyright: ignore[reportPrivateUsage]


def test_a_cached_variant_llama_cpp_refuses_is_measured_again(
    build: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _cache(
        build,
        {"chosen": "sapphirerapids", "probes": [{"name": "sapphirerapids", "score": 99, "runs": True}]},
    )
    ggml = _FakeGgml({"sapphirerapids"})
    monkeypatch.setattr(cpu, "ggml_library", lambda: ggml)
    monkeypatch.setattr(cpu, "choose", lambda files, model: MEASURED)
    choice = cpu.ensure_backends()
    assert choice is not None and choice.chosen == "zen4" and not choice.refused
    assert ggml.loaded == ["zen4"]
    assert next(iter(json.loads(path.read_text()).values()))["chosen"] == "zen4"  # the cache is mended
    assert cpu.variant_verdict(choice).runs is True


def test_a_machine_too_busy_to_probe_loads_the_portable_variant_and_probes_again_next_start(
    build: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Under `stress`, a first start's probes ran out of time: the model failed to load ("Failed
    # to load model from file") because no CPU backend was registered at all.
    untold = (Probe("zen4", 90, None, detail="timed out"), Probe("x64", 1, None, detail=cpu.OUT_OF_TIME))
    monkeypatch.setattr(cpu, "choose", lambda files, model: Choice("x64", cpu.UNPROVEN, untold))
    ggml = _FakeGgml(set())
    monkeypatch.setattr(cpu, "ggml_library", lambda: ggml)
    monkeypatch.setattr("engine.llama.gpu_modules.load", lambda lib, folder: None)
    choice = cpu.ensure_backends()
    assert choice is not None and ggml.loaded == ["x64"] and cpu.variant_verdict(choice).runs is None
    assert not (machine_cache.cache_dir() / CACHE_FILE).exists()  # nothing cached: probed again next start
    assert cpu.in_use_line().startswith("CPU variant: chosen from 3")


def _probe_with(monkeypatch: pytest.MonkeyPatch, child: str) -> None:
    """Probes run `child` (tests/cpu_fakes.py): a real child process, a real SIGILL for sapphirerapids."""
    monkeypatch.setattr(cpu, "probe_variant", functools.partial(PROBE_VARIANT, child=child))


@pytest.mark.slow
def test_a_forced_variant_that_traps_is_probed_in_a_child_and_refused_in_one_line(
    build: dict[str, Path], monkeypatch: pytest.MonkeyPatch, fresh_llama: LlamaProcess
) -> None:
    """CV-02: forced, it was loaded unprobed and its first decode killed the process."""
    monkeypatch.setenv(cpu.FORCE_ENV, "sapphirerapids")
    ggml = _FakeGgml(set())
    monkeypatch.setattr(cpu, "ggml_library", lambda: ggml)
    _probe_with(monkeypatch, "tests.cpu_fakes:probe")
    with pytest.raises(ModelLoadError) as caught:
        cpu.ensure_cpu_runs()
    message = str(caught.value)
    assert message == (
        "CPU variant sapphirerapids cannot run here (died of SIGILL while decoding); "
        f"unset {cpu.FORCE_ENV} or name another"
    )
    assert ggml.loaded == []  # never loaded into this process
    choice = cpu.loaded()
    assert choice is not None and cpu.chosen_line(choice, frozenset()) == f"CPU variant: {message}"
    assert "cannot run here: died of SIGILL while decoding" in cpu.in_use_line()
    # The verdict is cached for this machine: the next process refuses without a child.
    fresh_llama.reset()
    monkeypatch.setattr(cpu, "probe_variant", lambda *a, **k: pytest.fail("probed again"))
    with pytest.raises(ModelLoadError):
        cpu.ensure_cpu_runs()
    # A forced variant that runs is used, and the automatic choice is still made afresh when unforced.
    fresh_llama.reset()
    _probe_with(monkeypatch, "tests.cpu_fakes:probe")
    monkeypatch.setenv(cpu.FORCE_ENV, "zen4")
    forced = cpu.ensure_backends()
    assert forced is not None and forced.chosen == "zen4" and not forced.refused and ggml.loaded == ["zen4"]
    assert cpu.read_cached(cpu.machine_key(build.values()), build) is None


def test_a_forced_variant_llama_cpp_refuses_says_so_in_one_line(
    build: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(cpu.FORCE_ENV, "sapphirerapids")
    monkeypatch.setattr(cpu, "ggml_library", lambda: _FakeGgml({"sapphirerapids"}))
    monkeypatch.setattr(cpu, "probe_variant", lambda name, *a, **k: Probe(name, -1, None, detail="unsure"))
    monkeypatch.setattr(cpu, "choose", lambda files, model: pytest.fail("a forced variant is not chosen"))
    with pytest.raises(ModelLoadError) as caught:
        cpu.ensure_cpu_runs()
    message = str(caught.value)
    assert message.startswith("CPU variant sapphirerapids cannot run here (llama.cpp refused") and "\n" not in message
    assert f"unset {cpu.FORCE_ENV}" in message


def _reaped() -> int:
    child = subprocess.Popen([sys.executable, "-S", "-c", "pass"])
    child.wait()
    return child.pid


@pytest.mark.slow  # starts a process or uses the real model (tests/slow_marks.py)
def test_a_run_that_died_before_its_first_decode_makes_the_next_start_fall_back(
    build: dict[str, Path], monkeypatch: pytest.MonkeyPatch, fresh_llama: LlamaProcess
) -> None:
    """CV-06: a cached choice that traps killed every run, and `ember doctor` called it fine."""
    path = _cache(
        build, {"chosen": "sapphirerapids", "probes": [{"name": "sapphirerapids", "score": 99, "runs": True}]}
    )
    ggml = _FakeGgml(set())
    monkeypatch.setattr(cpu, "ggml_library", lambda: ggml)
    first = cpu.ensure_backends()  # the cached choice is loaded: no marker until a decode starts
    assert first is not None and first.chosen == "sapphirerapids"
    markers = machine_cache.cache_dir() / cpu.STARTS_DIR
    mine = markers / str(os.getpid())
    assert not mine.exists()
    cpu.decoding()  # the first decode: a marker until it is done
    assert mine.read_text() == "sapphirerapids"
    cpu.decoded()
    cpu.decoding()  # later decodes leave none
    assert not mine.exists()
    # That process dies of SIGILL before its first decode: its marker stays behind.
    (markers / str(_reaped())).write_text("sapphirerapids")
    (markers / str(os.getppid())).write_text("zen4")  # a process still running: not a crash
    fresh_llama.reset()  # the next start
    zen4 = Choice("zen4", cpu.PROBED, (Probe("zen4", 90, True),))

    def choose(files: dict[str, Path], model: object) -> Choice:
        assert "sapphirerapids" not in files  # the variant that took a run down is not tried again
        return zen4

    monkeypatch.setattr(cpu, "choose", choose)
    again = cpu.ensure_backends()
    assert again is not None and again.chosen == "zen4" and ggml.loaded == ["sapphirerapids", "zen4"]
    gone = again.probe("sapphirerapids")
    assert gone is not None and gone.runs is False and gone.detail == cpu.CRASHED
    line = cpu.chosen_line(again, frozenset())
    assert f"skipped: sapphirerapids ({cpu.CRASHED})" in line  # what `ember doctor` shows
    assert next(iter(json.loads(path.read_text()).values()))["chosen"] == "zen4"  # the cache is mended
    assert [p.name for p in markers.iterdir()] == [str(os.getppid())]


@pytest.mark.slow  # starts a process or uses the real model (tests/slow_marks.py)
def test_a_forced_variant_that_took_a_run_down_is_refused_next_time(
    build: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(cpu.FORCE_ENV, "zen4")
    monkeypatch.setattr(cpu, "ggml_library", lambda: _FakeGgml(set()))
    monkeypatch.setattr(cpu, "probe_variant", lambda *a, **k: pytest.fail("a crash is not probed away"))
    markers = machine_cache.cache_dir() / cpu.STARTS_DIR
    markers.mkdir(parents=True)
    (markers / str(_reaped())).write_text("zen4")
    (markers / "not-a-pid").write_text("zen4")  # ignored, as is anything that is not a process's marker
    with pytest.raises(ModelLoadError) as caught:
        cpu.ensure_cpu_runs()
    assert str(caught.value).startswith(f"CPU variant zen4 cannot run here ({cpu.CRASHED})")


def _a_built_variant_this_cpu_lacks() -> str | None:
    """A variant of the real build whose instructions this CPU lacks (ggml's score 0, read in a
    child): forced, it traps. With #53's four variants that is `skylakex` on a CPU without
    AVX-512; a CPU with AVX-512 runs them all (the 14-variant build had `sapphirerapids` here)."""
    files = cpu.variant_files(cpu.lib_dir())
    return next((p.name for p in cpu.read_scores(files) if p.score == 0), None) if files else None


def _ember(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "desktop", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ | env,
        check=False,
    )


@pytest.mark.slow
def test_the_real_build_refuses_a_forced_or_cached_variant_that_cannot_run(tmp_path: Path) -> None:
    lacking = _a_built_variant_this_cpu_lacks()
    if lacking is None:
        pytest.skip("this CPU runs every variant of this build (none to refuse)")
    chat = ("chat", "--max-tokens", "3", "--no-history", "--threads", "1", "hi")
    env: dict[str, Any] = {"EMBER_CACHE_DIR": str(tmp_path / "cache")}
    forced = _ember(env | {cpu.FORCE_ENV: lacking}, *chat)
    assert forced.returncode != 0
    assert f"CPU variant {lacking} cannot run here" in forced.stderr and "Traceback" not in forced.stderr
    assert "could not load it" not in forced.stderr  # the model file is not blamed
    assert _ember(env, *chat).returncode == 0  # fills the cache
    path = tmp_path / "cache" / CACHE_FILE
    data = json.loads(path.read_text())
    key = next(iter(data))
    data[key]["chosen"] = lacking  # CV-06: as a cache copied from a host that runs it
    path.write_text(json.dumps(data))
    healed = _ember(env, *chat)
    assert healed.returncode == 0, healed.stderr
    assert json.loads(path.read_text())[key]["chosen"] != lacking


@pytest.mark.slow
def test_a_real_run_killed_before_its_first_decode_is_avoided_and_named_by_doctor(tmp_path: Path) -> None:
    """CV-06 end to end: a process dies of SIGILL with the variant loaded; the next start (here
    `ember doctor`) leaves that variant out, probes again, and says why."""
    if not cpu.variant_files(cpu.lib_dir()):
        pytest.skip("this llama.cpp build has its CPU backend built in (no run-time variants)")
    env = {"EMBER_CACHE_DIR": str(tmp_path / "cache"), cpu.FORCE_ENV: ""}
    trap = (
        "import os, signal\n"
        "from engine.llama import cpu\n"
        "print(cpu.ensure_backends().chosen, flush=True)\n"
        "cpu.decoding()\n"
        "os.kill(os.getpid(), signal.SIGILL)  # as a variant's first decode does where it traps\n"
    )
    died = subprocess.run(
        [sys.executable, "-c", trap], capture_output=True, text=True, timeout=300, env=os.environ | env, check=False
    )
    assert died.returncode == -signal.SIGILL, died.stderr
    trapped = died.stdout.split()[0]
    doctor = _ember(env, "doctor")
    assert f"skipped: {trapped} ({cpu.CRASHED})" in doctor.stdout + doctor.stderr
    assert f"CPU variant: {trapped} (" not in doctor.stdout  # another one was chosen
    assert not list((tmp_path / "cache" / cpu.STARTS_DIR).iterdir())  # doctor's own marker went at exit
