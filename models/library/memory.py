"""Will a model fit? Weights plus KV cache for a context length, against free memory.

The estimate is deliberately simple and errs high: weights are the file size (llama.cpp
maps them whole), the KV cache is f16 K and V for every attention layer at the full
context (sliding-window layers would need less), and compute buffers are left out.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from models.gguf.meta import ModelMetadata

KV_BYTES_PER_VALUE = 2  # f16, llama.cpp's default cache type
_MEMINFO = Path("/proc/meminfo")


@dataclass(frozen=True, slots=True)
class MemoryEstimate:
    weights_bytes: int
    kv_cache_bytes: int
    context_length: int
    available_bytes: int | None  # None when the platform does not say
    warning: str | None  # set when the estimate exceeds what is available

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


def kv_cache_bytes(meta: ModelMetadata, n_ctx: int) -> int:
    """f16 K and V for `n_ctx` positions: 2 * n_ctx * sum over layers of n_embd_{k,v}_gqa.

    For a uniform model that is 2 * n_layer * n_ctx * head_dim * n_head_kv * 2 bytes. Layers
    with no KV heads (recurrent or convolution layers in hybrids) cost nothing here.
    """
    if not meta.head_count or not meta.embedding_length:
        return 0
    head_dim = meta.embedding_length // meta.head_count
    k_len = meta.key_length or head_dim
    v_len = meta.value_length or head_dim
    kv_heads = sum(meta.head_count_kv_layers)
    return n_ctx * kv_heads * (k_len + v_len) * KV_BYTES_PER_VALUE


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
    meta: ModelMetadata, n_ctx: int, *, available: int | Literal["measure"] | None = "measure"
) -> MemoryEstimate:
    """Estimate for `meta` at `n_ctx`; `available` is measured now unless given (bytes/None)."""
    free = available_memory() if available == "measure" else available
    kv = kv_cache_bytes(meta, n_ctx)
    weights = meta.size_bytes
    return MemoryEstimate(weights, kv, n_ctx, free, _warning(weights + kv, weights, kv, free))
