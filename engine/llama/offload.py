"""How many layers go to the GPU, and the one line that says where a model runs.

The per-model setting `gpu_layers` means: 0 = CPU only, N = N layers, -1 = as many as
fit (the default). "As many as fit" asks llama.cpp for the GPUs' free memory now and
leaves room for the KV cache at the chosen context and for compute buffers. The estimate
is simple on purpose (weights spread evenly over the layers, the KV cache of the chosen type); a load that
still fails is retried with fewer layers, then on the CPU (`load_attempts`).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.llama.llama_devices import Device
from models.gguf.meta import ModelMetadata
from models.library.memory import kv_cache_bytes

ALL_LAYERS = -1  # llama.cpp's n_gpu_layers for "every layer" (the setting's -1 is AUTO_GPU_LAYERS)
MIB = 1 << 20
# Compute buffers, the CUDA context and the logits: measured at a few hundred MiB for
# 1-8B models at 4k context; a fixed floor plus a share of the card keeps us clear.
HEADROOM_BYTES = 768 * MIB
HEADROOM_SHARE = 0.03


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a model runs: the `n_gpu_layers` given to llama.cpp and the words for it."""

    n_gpu_layers: int  # for llama.cpp: 0 = CPU, -1 = every layer, N = N layers
    offloaded: int  # layers actually on the GPU (0 on the CPU)
    n_layer: int | None
    device: str  # the GPU's description, "" on the CPU
    cpu_reason: str = ""  # why the CPU, when it is the CPU
    backend: str = ""  # llama.cpp's GPU backend: Vulkan, CUDA, … ("" when unknown or on the CPU)

    @property
    def on_gpu(self) -> bool:
        return self.offloaded > 0

    def summary(self) -> str:
        """`GPU · Vulkan · 30/30 layers · AMD Radeon RX 7800 XT` or `CPU · this build has no GPU support`."""
        if self.on_gpu:
            total = self.n_layer if self.n_layer is not None else "?"
            return " · ".join(p for p in ("GPU", self.backend, f"{self.offloaded}/{total} layers", self.device) if p)
        return f"CPU · {self.cpu_reason}" if self.cpu_reason else "CPU"


def cpu_placement(reason: str, n_layer: int | None = None) -> Placement:
    return Placement(0, 0, n_layer, "", reason)


def gpu_placement(n_gpu_layers: int, n_layer: int | None, gpus: list[Device]) -> Placement:
    if n_gpu_layers == 0:
        return cpu_placement("no layer fits in GPU memory", n_layer)
    if n_gpu_layers > 0 and (n_layer is None or n_gpu_layers < n_layer):
        offloaded = n_gpu_layers
    else:  # every layer (1 stands for "some" when the model does not say how many it has)
        offloaded = n_layer or 1
    names = sorted({d.description or d.name for d in gpus})
    backends = sorted({d.name.rstrip("0123456789") for d in gpus if d.name.rstrip("0123456789")})
    return Placement(n_gpu_layers, offloaded, n_layer, " + ".join(names), backend=" + ".join(backends))


def layers_that_fit(meta: ModelMetadata, n_ctx: int, free_bytes: int, kv_cache: str = "f16") -> int:
    """`ALL_LAYERS` if every layer fits in `free_bytes` with room to spare, else how many do (0+)."""
    n_layer = meta.block_count
    if not n_layer or n_layer <= 0:
        return ALL_LAYERS if meta.size_bytes < free_bytes // 2 else 0
    budget = free_bytes - HEADROOM_BYTES - int(free_bytes * HEADROOM_SHARE)
    per_layer = meta.size_bytes / (n_layer + 1)  # +1: embeddings and output head
    kv_per_layer = kv_cache_bytes(meta, n_ctx, kv_cache) / n_layer
    fit = int((budget - per_layer) // (per_layer + kv_per_layer)) if budget > per_layer else 0
    if fit >= n_layer:
        return ALL_LAYERS
    return max(0, fit)


def plan(
    requested: int,
    meta: ModelMetadata,
    n_ctx: int,
    *,
    supported: bool,
    gpus: list[Device],
    gpu_backends: list[str],
    kv_cache: str = "f16",
) -> Placement:
    """The placement to try first for a model whose settings ask for `requested` layers
    (`AUTO_GPU_LAYERS`: as many as fit)."""
    n_layer = meta.block_count
    if requested == 0:
        return cpu_placement("GPU off in this model's settings", n_layer)
    if not supported:
        reason = "no GPU found" if gpu_backends else "this build has no GPU support"
        return cpu_placement(reason, n_layer)
    if requested > 0:
        return gpu_placement(requested, n_layer, gpus)
    free = sum(d.free_bytes for d in gpus)
    if not gpus or free <= 0:  # offload works, but the device API said nothing: trust llama.cpp
        return gpu_placement(ALL_LAYERS, n_layer, gpus)
    return gpu_placement(layers_that_fit(meta, n_ctx, free, kv_cache), n_layer, gpus)


def fallbacks(first: Placement, gpus: list[Device]) -> list[Placement]:
    """`first`, then half its layers, then the CPU: what a failed GPU load retries with."""
    attempts = [first]
    if not first.on_gpu:
        return attempts
    half = first.offloaded // 2
    if half > 0:
        attempts.append(gpu_placement(half, first.n_layer, gpus))
    attempts.append(cpu_placement("the GPU load failed", first.n_layer))
    return attempts


GPU_BACKEND_NAMES = ("CUDA", "ROCm", "HIP", "Vulkan", "Metal", "SYCL", "OpenCL", "MUSA", "CANN", "RPC")


def gpu_backend_names(backends: list[str]) -> list[str]:
    """The GPU backends among llama.cpp's registered ones (CPU and BLAS are not)."""
    return [b for b in backends if any(b.upper().startswith(g.upper()) for g in GPU_BACKEND_NAMES)]
