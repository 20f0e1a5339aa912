"""Which quantization formats have fast CPU kernels, and which fast ones a slow file can become.

Plain data, without llama.cpp: the window asks it while showing a model's details, long before
(and without) loading llama.cpp (`engine.rewrite.requantize` does the rewriting).
"""

from __future__ import annotations

from models.library.speed import REPACKED

# Formats with a repacked kernel on x86 CPUs (ggml-cpu's repack.cpp): nothing to gain.
FAST_FORMATS = REPACKED
# Slow formats and the fast ones worth trying for each, best guess first (the caller measures).
CANDIDATES: dict[str, tuple[str, ...]] = {
    "Q4_1": ("Q4_0", "Q8_0"),
    "Q5_0": ("Q8_0",),
    "Q5_1": ("Q8_0",),
    "Q8_1": ("Q8_0",),
}


def is_fast(quantization: str) -> bool:
    return quantization in FAST_FORMATS


def candidates_for(quantization: str) -> tuple[str, ...]:
    """The fast formats a file in `quantization` can be rewritten into; empty when none helps."""
    return CANDIDATES.get(quantization, ())
