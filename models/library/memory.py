"""Will a model fit? Weights plus KV cache for a context length, against free memory.

The estimate is deliberately simple and errs high: weights are the file size (llama.cpp
maps them whole), the KV cache is K and V of the chosen cache type (f16 unless the model's
settings say q8_0 or q4_0) for every attention layer at the full context (sliding-window
layers would need less). `compute_buffer_bytes` is an allowance for llama.cpp's compute
buffers (the "fits this machine" marks of the model catalogue add it; `estimate_memory`,
which the picker shows, leaves it out).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from models.gguf.meta import ModelMetadata

# Bytes per cached value of each KV cache type: ggml's block sizes (q8_0: 32 values in
# 34 bytes, q4_0: 32 in 18). A quantized cache needs head sizes divisible by 32.
KV_CACHE_TYPES: dict[str, float] = {"f16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32}
KV_BLOCK = 32
# Compute buffers (the graph's scratch, the logits, a batch of activations): a floor plus a
# share per context position. Measured at a few hundred MiB for 1-8B models at 4k context
# (engine/llama/offload.py keeps the same margin on a GPU); this errs high.
COMPUTE_FLOOR_BYTES = 256 * 1024 * 1024
COMPUTE_BYTES_PER_POSITION = 64 * 1024
_MEMINFO = Path("/proc/meminfo")


@dataclass(frozen=True, slots=True)
class MemoryEstimate:
    weights_bytes: int
    kv_cache_bytes: int
    context_length: int
    available_bytes: int | None  # None when the platform does not say
    warning: str | None  # set when the estimate exceeds what is available
    kv_cache: str = "f16"  # the KV cache type estimated for

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv_cache_bytes


def format_bytes(n: int) -> str:
    """1_500_000_000 -> "1.5 GB" (decimal units, as file managers show sizes)."""
    if n < 1000:
        return f"{n} B"
    for unit, scale in (("KB", 1e3), ("MB", 1e6)):
        if n < scale * 1000:
            return f"{n / scale:.1f} {unit}"
    return f"{n / 1e9:.1f} GB"


def head_sizes(meta: ModelMetadata) -> tuple[int, int] | None:
    """(K, V) values per attention head, or None if the metadata does not say."""
    if not meta.head_count or not meta.embedding_length:
        return None
    head_dim = meta.embedding_length // meta.head_count
    return meta.key_length or head_dim, meta.value_length or head_dim


def kv_cache_bytes(meta: ModelMetadata, n_ctx: int, kv_cache: str = "f16") -> int:
    """K and V for `n_ctx` positions: n_ctx * sum over layers of n_embd_{k,v}_gqa, times the
    type's bytes per value (2 for f16).

    For a uniform f16 model that is 2 * n_layer * n_ctx * head_dim * n_head_kv * 2 bytes.
    Layers with no KV heads (recurrent or convolution layers in hybrids) cost nothing here.
    """
    sizes = head_sizes(meta)
    if sizes is None:
        return 0
    kv_heads = sum(meta.head_count_kv_layers)
    return int(n_ctx * kv_heads * (sizes[0] + sizes[1]) * KV_CACHE_TYPES[kv_cache])


def compute_buffer_bytes(n_ctx: int) -> int:
    """The allowance for llama.cpp's compute buffers at a context of `n_ctx` positions."""
    return COMPUTE_FLOOR_BYTES + max(0, n_ctx) * COMPUTE_BYTES_PER_POSITION


def kv_cache_problem(meta: ModelMetadata, kv_cache: str, flash_attn: bool = True) -> str | None:
    """Why llama.cpp would refuse this KV cache type for this model, or None."""
    if kv_cache not in KV_CACHE_TYPES:
        return f"unknown KV cache type {kv_cache!r}: use {', '.join(KV_CACHE_TYPES)}"
    if kv_cache == "f16":
        return None
    if not flash_attn:
        return f"a {kv_cache} KV cache needs flash attention (llama.cpp quantizes V only with it)"
    sizes = head_sizes(meta)
    if sizes is not None and (sizes[0] % KV_BLOCK or sizes[1] % KV_BLOCK):
        return (
            f"a {kv_cache} KV cache needs attention heads of a multiple of {KV_BLOCK} values; "
            f"this model's are {sizes[0]} (K) and {sizes[1]} (V): use f16"
        )
    return None


def _meminfo_available(meminfo: Path) -> int | None:
    try:
        text = meminfo.read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("MemAvailable:"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                return int(parts[1]) * 1024  # the kernel reports kB
    return None


def _sysconf_available() -> int | None:
    # POSIX fallback; counts free pages only (no reclaimable cache), so it errs low.
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def available_memory(meminfo: Path = _MEMINFO) -> int | None:
    """Bytes of memory available to a new process, or None if unknown on this platform."""
    if sys.platform.startswith("linux"):
        found = _meminfo_available(meminfo)
        if found is not None:
            return found
    return _sysconf_available()


def _warning(total: int, weights: int, kv: int, available: int | None) -> str | None:
    if available is None or total <= available:
        return None
    return (
        f"Needs about {format_bytes(total)} (model {format_bytes(weights)} + context "
        f"{format_bytes(kv)}) but only {format_bytes(available)} is free; "
        "choose a shorter context or a smaller model."
    )


def estimate_memory(
    meta: ModelMetadata,
    n_ctx: int,
    *,
    available: int | Literal["measure"] | None = "measure",
    kv_cache: str = "f16",
) -> MemoryEstimate:
    """Estimate for `meta` at `n_ctx` with a `kv_cache`-type cache; `available` is measured
    now unless given (bytes/None)."""
    free = available_memory() if available == "measure" else available
    kv = kv_cache_bytes(meta, n_ctx, kv_cache)
    weights = meta.size_bytes
    return MemoryEstimate(weights, kv, n_ctx, free, _warning(weights + kv, weights, kv, free), kv_cache)
