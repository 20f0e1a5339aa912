"""The machine profile's sources (issue #48): `ember bench` leaves one for `ember models PATH`,
the bench reads the prompt apart from a retried turn, and the GPU's profile beside the CPU's.

No GPU is needed: the timed run (`machine_profile._run`) and the GPU seam (`_gpu_name`) are
faked; what they stand in for is llama.cpp's load and decode, measured in
tests/test_speed_prediction.py's slow test on the CPU.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from desktop.cli.main import main
from engine.backends import cpu_probe, machine_profile
from engine.backends.base import Request
from engine.backends.machine_profile import Timings
from engine.backends.scripted import ScriptedBackend
from engine.bench import quick
from models.gguf.meta import read_metadata
from models.library.speed import MachineProfile, predict_meta
from tests import gguf_factory as gf

# The built-in on a 2-core CPU: 64 prompt tokens in 0.5 s, 35 ms a token (4 ms of it the output
# projection); on the GPU ten times faster.
CPU_RUN = Timings([0.5, 0.6, 0.7], [0.035] * 8 + [0.05] * 8, [0.031] * 16)
GPU_RUN = Timings([0.05, 0.06, 0.07], [0.0035] * 16, [0.0031] * 16)


@pytest.fixture(autouse=True)
def _own_profile() -> Iterator[None]:
    yield
    (cpu_probe.cache_dir() / machine_profile.PROFILE_FILE).unlink(missing_ok=True)


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The timed run faked: CPU_RUN, or GPU_RUN with every layer offloaded; records the layers asked."""
    asked: list[int] = []

    def fake_run(path: Path, threads: int) -> Timings:
        asked.append(0)
        return CPU_RUN

    monkeypatch.setattr(machine_profile, "_run", fake_run)
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
