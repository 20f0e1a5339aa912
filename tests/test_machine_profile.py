"""The machine profile's sources (issue #48): `ember bench` leaves one for `ember models PATH`,
the bench reads the prompt apart from a retried turn, and the GPU's profile beside the CPU's.

No GPU is needed: the timed run (`machine_profile._run`) and the GPU seam (`_gpu_name`) are
faked; what they stand in for is llama.cpp's load and decode, measured in
tests/test_speed_prediction.py's slow test on the CPU.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from desktop.cli.main import main
from desktop.core import get_models
from engine.backends.base import Request
from engine.backends.scripted import ScriptedBackend
from engine.bench import quick
from engine.llama import machine_cache, machine_profile
from engine.llama.machine_profile import Timings
from models.gguf.meta import read_metadata
from models.library.catalogue import shipped_catalogue
from models.library.fit import Fit, FreeMemory, fit_file, predict_file, ranked
from models.library.speed import MachineProfile, file_weights, predict_meta
from tests import gguf_factory as gf

# The built-in on a 2-core CPU: 64 prompt tokens in 0.5 s, 35 ms a token (4 ms of it the output
# projection); on the GPU ten times faster.
CPU_RUN = Timings([0.5, 0.6, 0.7], [0.035] * 8 + [0.05] * 8, [0.031] * 16)
GPU_RUN = Timings([0.05, 0.06, 0.07], [0.0035] * 16, [0.0031] * 16)


@pytest.fixture(autouse=True)
def _own_profile() -> Iterator[None]:
    yield
    (machine_cache.cache_dir() / machine_profile.PROFILE_FILE).unlink(missing_ok=True)


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The timed run faked: CPU_RUN, or GPU_RUN with every layer offloaded; records the layers asked."""
    asked: list[int] = []

    def fake_run(path: Path, threads: int, gpu_layers: int = 0) -> Timings:
        asked.append(gpu_layers)
        return GPU_RUN if gpu_layers else CPU_RUN

    monkeypatch.setattr(machine_profile, "_run", fake_run)
    monkeypatch.setattr(machine_profile, "_gpu_name", lambda: None)
    return asked


def _say(_: str) -> None:
    pass


# --- `ember bench` leaves the profile it measured ---------------------------------------------


def test_after_ember_bench_describing_a_file_predicts_its_speed(
    runs: list[int], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = gf.write_tiny_llama(tmp_path / "m.gguf")
    assert machine_profile.cached() is None
    report = quick.predicted(model, 1, _say)  # what `ember bench` measures before its turns
    cached = machine_profile.cached()
    assert cached is not None  # the bench's own figures are the medians; the cache keeps the fastest
    fastest = MachineProfile.from_json(cached.to_json())
    assert fastest is not None and predict_meta(fastest, read_metadata(model)).decode_tps > report["predicted_tps"]
    assert main(["models", str(model)]) == 0
    out = capsys.readouterr().out
    assert "words a second here" in out and "not known yet" not in out


def test_ember_bench_keeps_a_profile_already_cached_and_calibrated(runs: list[int], tmp_path: Path) -> None:
    model = gf.write_tiny_llama(tmp_path / "m.gguf")
    first = machine_profile.measure(1)
    predicted = predict_meta(first, read_metadata(model)).decode_tps
    machine_profile.remember(model, predicted * 0.5, tokens=64)  # real use: slower than predicted, kept
    calibrated = machine_profile.cached()
    assert calibrated is not None and calibrated.calibration < 1
    quick.predicted(model, 1, _say)
    after = machine_profile.cached()
    assert after is not None and after.calibration == calibrated.calibration
    assert after.decode_bytes_per_s == pytest.approx(first.decode_bytes_per_s, rel=1e-6)


def test_a_profile_never_saved_stays_out_of_the_cache(runs: list[int]) -> None:
    machine_profile.measure(1, save="never", typical=True)
    assert machine_profile.cached() is None


# --- the bench's prompt reading ---------------------------------------------------------------


class _BenchScript(ScriptedBackend):
    """A scripted model the bench can time: an empty KV cache and a 100-token prompt."""

    prompt_lookup = True

    def reset_cache(self) -> None:
        pass

    def prompt_tokens(self, request: Request) -> tuple[list[int], str]:
        return [0] * 100, ""


def test_the_bench_reads_the_prompt_apart_from_a_retried_turn() -> None:
    # Gemma 3 270M's first attempt here shows nothing for 64 tokens: the turn's first visible word
    # comes after that attempt and the retry's prompt (half a second here), so prompt tokens over
    # the time to it read the prompt ×3.4 slower than llama.cpp does. The prompt alone: 5 ms.
    backend = _BenchScript(
        [
            ["warm"],  # the warm-up turn
            [{"text": " ", "delay_ms": 500}],  # the timed turn's attempt with no visible answer…
            ["an", " answer"],  # …and its retry
            [{"text": "x", "delay_ms": 5}],  # the prompt read alone, to its first token
        ]
    )
    report = quick.measure_loaded(backend, quick.request("a licence"), _say, rounds=1)
    assert report["engine_ttft_ms"] >= 500  # what a user waits for is still the turn's
    assert report["engine_pp_tps"] > 100 / 0.25  # not 100 tokens over the turn's half second
    assert backend.requests[-1].max_tokens == 1 and backend.remaining == 0


# --- the GPU's profile ------------------------------------------------------------------------


def _gpu(monkeypatch: pytest.MonkeyPatch, name: str = "Fake GPU 24 GB") -> None:
    monkeypatch.setattr(machine_profile, "_gpu_name", lambda: name)


def test_with_a_gpu_the_builtin_is_measured_offloaded_too(runs: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    _gpu(monkeypatch)
    profile = machine_profile.measure(1)
    assert runs == [0, -1]  # the CPU's run, then every layer on the GPU
    assert profile.gpu is not None and profile.gpu.device == "Fake GPU 24 GB" and not profile.gpu.on_cpu
    assert profile.gpu.decode_bytes_per_s > 5 * profile.decode_bytes_per_s
    cached = machine_profile.cached()
    assert cached is not None and cached.gpu is not None and cached.gpu.device == "Fake GPU 24 GB"
    assert cached.gpu.prompt_ops_per_s == pytest.approx(profile.gpu.prompt_ops_per_s, rel=1e-6)


def test_without_a_gpu_only_the_cpu_is_measured(runs: list[int]) -> None:
    assert machine_profile.measure(1).gpu is None and runs == [0]


def test_a_gpu_run_that_fails_leaves_the_cpus_profile(runs: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.errors import BenchError

    def fail_on_gpu(path: Path, threads: int, gpu_layers: int = 0) -> Timings:
        if gpu_layers:
            raise BenchError("out of GPU memory")
        return CPU_RUN

    _gpu(monkeypatch)
    monkeypatch.setattr(machine_profile, "_run", fail_on_gpu)
    profile = machine_profile.measure(1)
    assert profile.gpu is None and machine_profile.cached() is not None


def test_a_new_gpu_is_a_new_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    before = machine_profile.machine_key()
    monkeypatch.setattr(machine_profile, "_gpus", lambda: ["renderD128"])
    assert machine_profile.machine_key() != before  # the cached profile is measured again


def _profiles(runs: list[int], monkeypatch: pytest.MonkeyPatch) -> MachineProfile:
    _gpu(monkeypatch)
    return machine_profile.measure(1)


def test_a_model_that_fits_the_gpu_is_predicted_from_the_gpus_profile(
    runs: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    profile = _profiles(runs, monkeypatch)
    entry = next(e for e in shipped_catalogue() if e.key == "qwen3-1.7b")
    file = entry.files[0]
    big_gpu = FreeMemory(ram_bytes=32_000_000_000, gpu_bytes=24_000_000_000, gpu_name="Fake GPU")
    verdict = fit_file(entry, file, big_gpu)
    assert verdict.fit is Fit.GPU
    on_gpu = predict_file(entry, file, verdict, profile)
    on_cpu = predict_file(entry, file, fit_file(entry, file, FreeMemory(ram_bytes=32_000_000_000)), profile)
    assert on_gpu is not None and on_cpu is not None and on_gpu.decode_tps > 5 * on_cpu.decode_tps
    cpu_only = MachineProfile.from_json({k: v for k, v in profile.to_json().items() if k != "gpu"})
    assert predict_file(entry, file, verdict, cpu_only) is None  # no GPU profile: no GPU figure invented
    suggestions = ranked(shipped_catalogue(), big_gpu, profile=profile)
    assert all(s.prediction is not None for s in suggestions if s.verdict.fit is Fit.GPU)


def test_on_the_gpu_every_format_costs_its_bytes(tmp_path: Path) -> None:
    meta = read_metadata(gf.write_tiny_llama(tmp_path / "m.gguf"))
    assert file_weights(meta, cpu=False).decode_bytes <= file_weights(meta).decode_bytes


def test_ember_models_path_says_the_gpus_speed_where_the_file_fits_it(
    runs: list[int], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = _profiles(runs, monkeypatch)
    model = gf.write_tiny_llama(tmp_path / "m.gguf")
    expected: dict[str, Any] = {}
    for name, free in (("gpu", 24_000_000_000), ("cpu", 1_000_000)):  # 1 MB free on the GPU: the CPU's
        monkeypatch.setattr(get_models, "measure_free_memory", lambda free=free: FreeMemory(8 << 30, free, "GPU"))
        assert main(["models", "--json", str(model)]) == 0
        expected[name] = json.loads(capsys.readouterr().out)[0]["predicted"]["decode_tps"]
    assert profile.gpu is not None
    meta = read_metadata(model)
    assert expected["gpu"] == pytest.approx(predict_meta(profile.gpu, meta).decode_tps, abs=0.1)
    assert expected["cpu"] == pytest.approx(predict_meta(profile, meta).decode_tps, abs=0.1)


def test_a_speed_measured_on_the_gpu_calibrates_the_gpus_predictions_only(
    runs: list[int], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    profile = _profiles(runs, monkeypatch)
    model = gf.write_tiny_llama(tmp_path / "m.gguf")
    assert profile.gpu is not None
    predicted = predict_meta(profile.gpu, read_metadata(model)).decode_tps
    machine_profile.remember(model, predicted * 0.5, tokens=64, on_gpu=True)
    cached = machine_profile.cached()
    assert cached is not None and cached.gpu is not None
    assert cached.gpu.calibration == pytest.approx(0.5, rel=0.01) and cached.calibration == 1.0


def test_a_turn_remembers_its_speed_for_the_device_it_ran_on(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from types import SimpleNamespace

    from engine.events import TurnStats
    from engine.turns import runner

    seen: list[bool] = []
    monkeypatch.setattr(machine_profile, "remember_once", lambda *_a, on_gpu: seen.append(on_gpu))
    stats = TurnStats(tokens=64, tokens_per_s=20.0)
    for offloaded in (0, 30, 12):  # on the CPU, every layer on the GPU, split (neither device's speed)
        placement = SimpleNamespace(offloaded=offloaded, n_layer=30)
        runner._remember_speed(SimpleNamespace(path=tmp_path / "m.gguf", placement=placement), stats)  # pyright: ignore[reportPrivateUsage, reportArgumentType]
    assert seen == [False, True]
