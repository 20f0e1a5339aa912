"""The GPU pick with fake device lists: which device a model runs on, and why, in one line (#35)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.llama import gpu_modules, machine_cache
from engine.llama.gpu_pick import ADD_VULKAN, FORCE_ENV, GpuDevice, choose
from engine.llama.llama_devices import Device
from engine.llama.offload import ALL_LAYERS, plan
from engine.llama.process_state import LlamaProcess
from models.gguf.meta import read_metadata

GIB = 1 << 30
LAVAPIPE = GpuDevice("Vulkan", 0, "llvmpipe (LLVM 15.0.6, 256 bits)", "software", 2 * GIB, 2 * GIB)
IGPU = GpuDevice("Vulkan", 1, "AMD Radeon 780M", "integrated", 12 * GIB, 16 * GIB)
DGPU = GpuDevice("Vulkan", 2, "AMD Radeon RX 7800 XT", "discrete", 8 * GIB, 16 * GIB)
H200_VK = GpuDevice("Vulkan", 3, "NVIDIA H200", "discrete", 139 * GIB, 141 * GIB)
H200_CUDA = GpuDevice("CUDA", 0, "NVIDIA H200", "discrete", 139 * GIB, 141 * GIB)


def test_discrete_beats_integrated_beats_software() -> None:
    assert choose([LAVAPIPE, IGPU, DGPU]).chosen == DGPU  # the iGPU's larger free memory does not count first
    assert choose([LAVAPIPE, IGPU]).chosen == IGPU
    pick = choose([LAVAPIPE])
    assert pick.chosen is None and pick.devices == (LAVAPIPE,)  # listed, never chosen on its own
    assert pick.line().startswith("GPU: none — only a software Vulkan device (llvmpipe")


def test_cuda_is_taken_over_vulkan_for_the_same_card() -> None:
    pick = choose([H200_VK, H200_CUDA, DGPU])
    assert pick.chosen == H200_CUDA
    assert pick.line() == "GPU: CUDA · NVIDIA H200 (139.0 GiB free) · chosen (the best GPU here)"


def test_the_user_can_ask_for_a_software_device_by_name_or_index() -> None:
    assert choose([LAVAPIPE, IGPU], "llvmpipe").chosen == LAVAPIPE
    assert choose([LAVAPIPE, IGPU], "0").chosen == LAVAPIPE
    assert choose([LAVAPIPE, IGPU], "vulkan1").chosen == IGPU
    assert choose([DGPU], "cpu").chosen is None
    assert choose([H200_VK, H200_CUDA], "vulkan").chosen == H200_VK  # the backend's best device


def test_a_typo_falls_back_to_the_automatic_pick_in_one_line() -> None:
    pick = choose([LAVAPIPE, DGPU], "Radeon RX 9999")
    assert pick.chosen == DGPU
    assert pick.note.startswith("GPU device 'Radeon RX 9999' not found (devices here: 0 llvmpipe")
    assert "\n" not in pick.note
    assert choose([LAVAPIPE], "7").chosen is None


def test_free_memory_decides_partial_offload(smollm_path: Path) -> None:
    from dataclasses import replace

    meta = replace(read_metadata(smollm_path), size_bytes=31 * GIB, block_count=30)
    for free, whole in ((64 * GIB, True), (8 * GIB, False)):
        card = replace(DGPU, free_bytes=free)
        chosen = choose([LAVAPIPE, card]).chosen
        assert chosen is not None and chosen == card
        seen = Device(f"Vulkan{chosen.index}", chosen.name, "GPU", chosen.free_bytes, chosen.total_bytes)
        placement = plan(-1, meta, 4096, supported=True, gpus=[seen], gpu_backends=["Vulkan"])
        assert (placement.n_gpu_layers == ALL_LAYERS) is whole
        assert placement.summary().startswith("GPU · Vulkan · 30/30 layers" if whole else "GPU · Vulkan · ")
        assert whole or 0 < placement.offloaded < 30


def test_the_childs_report_joins_vulkans_types_with_llamas_free_memory() -> None:
    report = {
        "vulkan": [
            {"index": 0, "name": "llvmpipe", "kind": "software", "total": 2 * GIB},
            {"index": 1, "name": "AMD Radeon RX 7800 XT", "kind": "discrete", "total": 16 * GIB},
        ],
        "ggml": [
            {"name": "Vulkan1", "type": 1, "description": "AMD Radeon RX 7800 XT", "free": 8 * GIB, "total": 16 * GIB},
            {"name": "CUDA0", "type": 1, "description": "NVIDIA H200", "free": 5, "total": 9},
            {"name": "CPU", "type": 0, "description": "AMD EPYC", "free": 1, "total": 1},
        ],
    }
    devices = gpu_modules.devices_from(report)
    assert [(d.backend, d.index, d.kind, d.free_bytes) for d in devices] == [
        ("Vulkan", 0, "software", 0),
        ("Vulkan", 1, "discrete", 8 * GIB),
        ("CUDA", 0, "discrete", 5),
    ]


@pytest.mark.slow  # starts a process or uses the real model (tests/slow_marks.py)
def test_a_driver_that_crashes_while_starting_is_one_line_and_no_device(tmp_path: Path) -> None:
    crash = "tests.gpu_fakes:crash_while_loading"
    devices, note = gpu_modules.list_devices([tmp_path / "libggml-vulkan.so"], child=crash)
    assert devices == []
    assert note == "libggml-vulkan.so failed while starting its driver (signal 11); running on the CPU"


def _fake_build(tmp_path: Path) -> Path:
    folder = tmp_path / "lib"
    folder.mkdir()
    (folder / "libggml-vulkan.so").write_bytes(b"not really")
    (folder / "libggml-cpu-x64.so").write_bytes(b"")
    return folder


def test_the_listing_is_cached_per_machine_and_the_pick_made_on_each_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(FORCE_ENV, raising=False)
    folder = _fake_build(tmp_path)
    calls: list[list[Path]] = []

    def listing(files: list[Path]) -> tuple[list[GpuDevice], str]:
        calls.append(files)
        return [LAVAPIPE, DGPU], ""

    monkeypatch.setattr(gpu_modules, "list_devices", listing)
    assert gpu_modules.decide(folder).chosen == DGPU
    monkeypatch.setenv(FORCE_ENV, "llvmpipe")
    assert gpu_modules.decide(folder).chosen == LAVAPIPE
    assert len(calls) == 1 and calls[0] == [folder / "libggml-vulkan.so"]
    cached = json.loads((tmp_path / "cache" / gpu_modules.CACHE_FILE).read_text())
    assert [d["name"] for entry in cached.values() for d in entry["devices"]] == [LAVAPIPE.name, DGPU.name]
    (folder / "libggml-vulkan.so").write_bytes(b"rebuilt")  # a new module: listed again
    gpu_modules.decide(folder)
    assert len(calls) == 2


def test_a_crash_is_cached_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    folder = _fake_build(tmp_path)
    monkeypatch.setattr(gpu_modules, "list_devices", lambda files: ([], "libggml-vulkan.so failed (signal 11)"))
    first = gpu_modules.decide(folder)
    assert first.chosen is None and first.line() == "GPU: none — libggml-vulkan.so failed (signal 11)"
    monkeypatch.setattr(gpu_modules, "list_devices", lambda files: pytest.fail("listed again"))
    assert gpu_modules.decide(folder) == first


def test_a_build_without_gpu_modules_says_how_to_add_vulkan(tmp_path: Path) -> None:
    pick = gpu_modules.decide(tmp_path)
    assert pick.chosen is None and pick.why == ADD_VULKAN
    assert "glslc" in pick.line() and "\n" not in pick.line()


def test_a_cache_with_a_bad_entry_is_listed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(machine_cache.CACHE_ENV, str(tmp_path))
    path = tmp_path / gpu_modules.CACHE_FILE
    path.write_text(json.dumps({"k": {"devices": [{"backend": "Vulkan", "index": "0"}], "note": ""}}))
    assert gpu_modules.read_cached("k") is None
    gpu_modules.write_cached("k", [DGPU], "")
    assert gpu_modules.read_cached("k") == ([DGPU], "")


def test_the_bench_reports_no_vulkan_device_and_the_build_times_without_the_module(
    smollm_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.bench import vulkan as bench_vulkan

    monkeypatch.setattr(bench_vulkan, "vulkan_device", lambda: None)
    report = bench_vulkan.compare_vulkan(smollm_path, 1, {})
    assert report["vulkan_device"] is None and report["vulkan_vs_cpu_tps_ratio"] is None
    assert report["build_seconds_cpu_only"] == bench_vulkan.BUILD_SECONDS_CPU_ONLY
    assert "build_seconds_with_vulkan" in report


@pytest.mark.slow  # starts a process or uses the real model (tests/slow_marks.py)
def test_the_listing_child_runs_as_a_real_function_here() -> None:
    """The child (engine.llama.gpu_list_child) starts, lists, and exits 0 with no module given:
    whatever the Vulkan loader sees here, and no note of a failed start."""
    devices, note = gpu_modules.list_devices([], timeout=60)
    assert "failed" not in note and "hung" not in note
    assert all(
        d.backend == "Vulkan" and d.kind in ("other", "integrated", "discrete", "virtual", "software") for d in devices
    )


# -- adversarial review 3, F9 (tracebacks): GV-12, GV-13, GV-20 ----------------------------------


@pytest.mark.parametrize("wanted", ["²", "①", "³²", "٣"])
def test_a_device_index_in_other_digits_is_a_pick_or_not_found_never_a_traceback(wanted: str) -> None:
    """`"²".isdigit()` is true and `int("²")` raises: the index is read only from decimal digits."""
    pick = choose([IGPU, DGPU], wanted)
    assert pick.chosen == DGPU  # "٣" is a decimal 3 (none here); "²" is no index: not found either way
    assert pick.note.startswith(f"GPU device {wanted!r} not found") and "\n" not in pick.note


def test_a_models_device_field_of_superscript_two_is_a_line_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, fresh_llama: LlamaProcess
) -> None:
    """GV-20: the second model of a run, its settings' device field `²` (gpu_modules.want → find)."""
    monkeypatch.delenv(FORCE_ENV, raising=False)
    fresh_llama.gpu_pick = choose([IGPU, DGPU])
    note = gpu_modules.want("²")
    assert note.startswith("GPU device '²' takes effect when Ember next starts") and "\n" not in note
