"""The machine, for the front ends: its cores, its CPU variant, its GPUs and its measured speed.

`ember doctor`, `ember --version`, the settings dialog's GPU row and the Get models page's fit
read the machine here: its memory, which models fit it and how fast each would run
(`models.library.fit` and `speed`), and `ember bench`'s quick measurement of one model
(`engine.bench.quick`: llama.cpp loads only when it measures). Each function looks its engine
module up when it is called, so a test that patches `engine.backends.<module>` still reaches
every front end. Nothing here imports llama.cpp except `gpu_offload_supported` (its first call
is slow: the window runs it off its thread) and `bench_measure`.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from engine.bench.quick import measure as bench_measure
from engine.bench.quick import predicted as bench_prediction
from engine.bench.quick import prediction_ratio
from engine.errors import ModelLoadError
from engine.llama import cpu, gpu_modules, llama_devices
from engine.llama.cpu_threads import default_threads, read_cpuinfo
from engine.llama.gpu_pick import GpuPick
from engine.llama.llama_devices import Device
from engine.llama.machine_profile import cached, child, measure, measured_decode
from engine.llama.offload import gpu_backend_names
from models.gguf.meta import ModelMetadata
from models.library.fit import (
    Fit,
    FreeMemory,
    Need,
    Suggestion,
    Verdict,
    estimate_need,
    fit_file,
    judge,
    predict_file,
    ranked,
    short_list,
)
from models.library.memory import available_memory, compute_buffer_bytes, estimate_memory
from models.library.settings import load_model_settings
from models.library.speed import USEFUL_TPS, MachineProfile, Prediction, predict_meta

__all__ = [
    "USEFUL_TPS",
    "Device",
    "Fit",
    "FreeMemory",
    "GpuPick",
    "MachineProfile",
    "Prediction",
    "Suggestion",
    "Verdict",
    "available_memory",
    "backend_names",
    "bench_measure",
    "bench_prediction",
    "cached",
    "child",
    "cpu_facts",
    "default_threads",
    "devices",
    "devices_offload",
    "estimate_need",
    "fit_file",
    "fits_gpu_whole",
    "gpu_backend_names",
    "gpu_devices",
    "gpu_facts",
    "gpu_offload_supported",
    "gpu_pick",
    "judge",
    "llama_build",
    "measure",
    "measured_decode",
    "predict_file",
    "predict_meta",
    "prediction_ratio",
    "ranked",
    "read_cpuinfo",
    "short_list",
    "system_info",
    "variant_line",
]


def llama_build() -> str:
    """llama.cpp's build, as `ember --version` prints it."""
    return cpu.llama_build()


def variant_line() -> str:
    """The CPU variant in use, in one line."""
    return cpu.in_use_line()


def devices() -> list[Device]:
    """Every device llama.cpp's ggml reports (CPU, GPUs), with free memory."""
    return llama_devices.devices()


def gpu_devices() -> list[Device]:
    """The GPUs among them."""
    return llama_devices.gpu_devices()


def backend_names() -> list[str]:
    return llama_devices.backend_names()


def system_info() -> str:
    return llama_devices.system_info()


def devices_offload() -> bool:
    """Whether the loaded ggml offers GPU offload (no llama-cpp-python import of its own)."""
    return llama_devices.gpu_offload_supported()


def gpu_offload_supported() -> bool:
    """Whether llama.cpp can offload here; imports llama.cpp first (slow the first time)."""
    from engine.llama import llama  # looked up at call time, so tests can patch it

    return llama.gpu_offload_supported()


def gpu_pick() -> GpuPick | None:
    """The GPU module chosen when llama.cpp loaded; None before that."""
    return gpu_modules.loaded()


def gpu_facts() -> dict[str, Any]:
    """The GPU modules' devices (software ones too), the one chosen and why (#35)."""
    pick = gpu_modules.loaded() or gpu_modules.decide(cpu.lib_dir())
    return {
        "line": pick.line(),
        "chosen": asdict(pick.chosen) if pick.chosen else None,
        "why": pick.why,
        "note": pick.note,
        "devices": [asdict(d) for d in pick.devices],
        "device_lines": pick.device_lines(),
    }


def cpu_facts(info: str) -> dict[str, Any]:
    """The CPU variant in use, what the CPU has unused, and the probe's verdict (#24)."""
    features, flags = cpu.build_features(info), cpu.cpu_flags()
    try:
        verdict = cpu.ensure_cpu_runs().detail
    except ModelLoadError as exc:
        verdict = str(exc)
    choice = cpu.loaded()
    line = cpu.chosen_line(choice, flags) if choice else cpu.variant_line(features, flags)
    return {
        "features": list(features),
        "unused": cpu.unused(features, flags),
        "line": line,
        "probe": verdict,
        "variant": choice.chosen if choice else None,
        "variants": [asdict(p) for p in choice.probes] if choice else [],
    }


def fits_gpu_whole(meta: ModelMetadata, free: FreeMemory) -> bool:
    """Whether `meta`'s file, at its context setting, fits the GPU's free memory whole (as the Get
    models page judges it): its speed is then predicted from the GPU's profile."""
    settings = load_model_settings(meta.path, n_ctx_train=meta.n_ctx_train)
    est = estimate_memory(meta, settings.context_length, available=None, kv_cache=settings.kv_cache)
    n_ctx = est.context_length
    need = Need(est.weights_bytes, est.kv_cache_bytes, compute_buffer_bytes(n_ctx), n_ctx)
    return judge(need, free).fit is Fit.GPU
