"""The Vulkan module in `ember bench --json` (#35): the device it would run on, its decode speed
against the CPU variant's, and what the module costs to build.

One process holds one GPU pick, so each side is a child: `EMBER_GPU_DEVICE=vulkan` (the Vulkan
module's best device, a software one included: on lavapipe the ratio is informational) with every
layer offloaded, and `EMBER_GPU_DEVICE=cpu`; the same model, threads and single-token decodes.
The build times are figures measured once on the project's 2-core machine and written down here
(docs/performance.md has how): a build is minutes, not something a bench repeats.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.child_env import python_child
from engine.llama import gpu_modules
from engine.llama.cpu import ensure_backends, lib_dir
from engine.llama.gpu_pick import FORCE_ENV
from tests.bench.cpu_variant import run_measuring

# llama-cpp-python 0.3.36 with the CPU variants, wall seconds on the 2-core machine when quiet.
BUILD_SECONDS_CPU_ONLY = 582
# The Vulkan module, built by packaging/vulkan-module.sh after that (uv sync cannot build it):
# 13 min 15 s wall, 455 CPU-seconds, 2026-12-03 at load 2.6-7.6 under nice (docs/performance.md,
# "The Vulkan module"). With Vulkan, a fresh machine pays both builds.
BUILD_SECONDS_VULKAN_MODULE = 795
BUILD_SECONDS_WITH_VULKAN = BUILD_SECONDS_CPU_ONLY + BUILD_SECONDS_VULKAN_MODULE
N_GEN = 32

MEASURE_CODE = """
import json, sys, time
from engine.llama.cpu import ensure_backends
from engine.llama import gpu_modules
ensure_backends()
pick = gpu_modules.loaded()
from engine.llama.llama_plain import new_llama
layers = -1 if pick is not None and pick.chosen is not None else 0
llm = new_llama(model_path=sys.argv[1], n_ctx=512, n_threads=int(sys.argv[2]), n_threads_batch=int(sys.argv[2]),
                n_gpu_layers=layers, verbose=False)
llm.eval(llm.tokenize(b"The quick brown fox jumps over the lazy dog."))
token = llm.tokenize(b" the", add_bos=False)[0]
start = time.perf_counter()
for _ in range(int(sys.argv[3])):
    llm.eval([token])
print(json.dumps({"device": pick.chosen.label() if pick and pick.chosen else None,
                  "tg": int(sys.argv[3]) / (time.perf_counter() - start)}))
"""


def vulkan_device() -> str | None:
    """`llvmpipe (LLVM 15.0.6, 256 bits) (software)`: the Vulkan module's best device, or None."""
    ensure_backends()
    pick = gpu_modules.loaded() or gpu_modules.decide(lib_dir())
    seen = [d for d in pick.devices if d.backend == "Vulkan"]
    if not seen or not gpu_modules.has_vulkan_module(lib_dir()):
        return None
    best = next((d for d in seen if not d.software), seen[0])
    return f"{best.name} ({best.kind})"


def _decode_tps(model: Path, threads: int, device: str, env: dict[str, str], n_gen: int) -> tuple[str | None, float]:
    child = python_child(MEASURE_CODE, str(model.absolute()), str(threads), str(n_gen), env=env, **{FORCE_ENV: device})
    result, _ = run_measuring(child)
    if result is None:
        return None, 0.0
    return result.get("device"), float(result.get("tg", 0.0))


def compare_vulkan(model: Path, threads: int, env: dict[str, str], n_gen: int = N_GEN) -> dict[str, Any]:
    """`vulkan_device`, `vulkan_vs_cpu_tps_ratio` (None without a Vulkan device) and the build times.
    `n_gen` decodes per side (a test asks for fewer: each costs about 0.8 s of CPU on lavapipe)."""
    out: dict[str, Any] = {
        "vulkan_device": vulkan_device(),
        "vulkan_vs_cpu_tps_ratio": None,
        "build_seconds_cpu_only": BUILD_SECONDS_CPU_ONLY,
        "build_seconds_with_vulkan": BUILD_SECONDS_WITH_VULKAN,
    }
    if out["vulkan_device"] is None:
        return out
    on_vulkan, vk_tps = _decode_tps(model, threads, "vulkan", env, n_gen)
    _, cpu_tps = _decode_tps(model, threads, "cpu", env, n_gen)
    if on_vulkan is not None and vk_tps > 0 and cpu_tps > 0:
        out["vulkan_vs_cpu_tps_ratio"] = round(vk_tps / cpu_tps, 3)
        out["vulkan_tg_tps"], out["vulkan_cpu_tg_tps"] = round(vk_tps, 1), round(cpu_tps, 1)
    return out
