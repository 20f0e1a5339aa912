"""Automatic GPU offload: how many layers fit, what a failed load retries with, and the status line."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from engine.llama.llama_devices import Device
from engine.llama.offload import fallbacks, gpu_backend_names, layers_that_fit, plan
from models.gguf.meta import ModelMetadata, read_metadata

GIB = 1 << 30
H200 = Device("CUDA0", "NVIDIA H200", "GPU", 140 * GIB, 141 * GIB)


def _meta(smollm_path: Path, size_bytes: int, layers: int = 30) -> ModelMetadata:
    return replace(read_metadata(smollm_path), size_bytes=size_bytes, block_count=layers)


def test_a_small_model_goes_wholly_to_a_big_gpu(smollm_path: Path) -> None:
    meta = read_metadata(smollm_path)
    placement = plan(-1, meta, 4096, supported=True, gpus=[H200], gpu_backends=["CUDA"])
    assert placement.n_gpu_layers == -1 and placement.offloaded == meta.block_count
    assert placement.summary() == f"GPU · CUDA · {meta.block_count}/{meta.block_count} layers · NVIDIA H200"


def test_a_model_too_big_for_the_card_gets_the_layers_that_fit(smollm_path: Path) -> None:
    meta = _meta(smollm_path, 31 * GIB)  # about 1 GiB a layer
    small = Device("CUDA0", "Small GPU", "GPU", 8 * GIB, 8 * GIB)
    fit = layers_that_fit(meta, 4096, small.free_bytes)
    assert 0 < fit < 8  # the headroom and the KV cache come off the top
    placement = plan(-1, meta, 4096, supported=True, gpus=[small], gpu_backends=["CUDA"])
    assert placement.summary() == f"GPU · CUDA · {fit}/30 layers · Small GPU"


def test_the_kv_cache_at_the_chosen_context_counts(smollm_path: Path) -> None:
    meta = _meta(smollm_path, 31 * GIB)
    assert layers_that_fit(meta, 131072, 16 * GIB) < layers_that_fit(meta, 2048, 16 * GIB)


def test_nothing_fits_means_the_cpu_with_a_reason(smollm_path: Path) -> None:
    meta = _meta(smollm_path, 300 * GIB)
    tiny = Device("CUDA0", "Tiny GPU", "GPU", 1 * GIB, 2 * GIB)
    placement = plan(-1, meta, 4096, supported=True, gpus=[tiny], gpu_backends=["CUDA"])
    assert placement.summary() == "CPU · no layer fits in GPU memory"


def test_the_settings_and_the_build_decide_before_memory(smollm_path: Path) -> None:
    meta = read_metadata(smollm_path)
    assert (
        plan(0, meta, 4096, supported=True, gpus=[H200], gpu_backends=["CUDA"]).summary()
        == "CPU · GPU off in this model's settings"
    )
    assert (
        plan(-1, meta, 4096, supported=False, gpus=[], gpu_backends=[]).summary()
        == "CPU · this build has no GPU support"
    )
    assert plan(-1, meta, 4096, supported=False, gpus=[], gpu_backends=["CUDA"]).summary() == "CPU · no GPU found"
    assert plan(12, meta, 4096, supported=True, gpus=[H200], gpu_backends=["CUDA"]).offloaded == 12


def test_a_failed_gpu_load_retries_with_half_the_layers_then_the_cpu(smollm_path: Path) -> None:
    meta = read_metadata(smollm_path)
    first = plan(-1, meta, 4096, supported=True, gpus=[H200], gpu_backends=["CUDA"])
    steps = [p.summary() for p in fallbacks(first, [H200])]
    assert steps == [
        "GPU · CUDA · 30/30 layers · NVIDIA H200",
        "GPU · CUDA · 15/30 layers · NVIDIA H200",
        "CPU · the GPU load failed",
    ]
    cpu = plan(0, meta, 4096, supported=True, gpus=[H200], gpu_backends=["CUDA"])
    assert fallbacks(cpu, []) == [cpu]


def test_gpu_backends_are_told_apart_from_cpu_ones() -> None:
    assert gpu_backend_names(["CUDA", "BLAS", "CPU"]) == ["CUDA"]
    assert gpu_backend_names(["Metal", "CPU"]) == ["Metal"]
    assert gpu_backend_names(["CPU"]) == []
