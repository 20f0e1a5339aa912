"""Rewriting a GGUF in another quantization with llama.cpp's own `llama_model_quantize`.

llama.cpp repacks some formats at load into interleaved layouts with fast AVX2/AVX-512 kernels
(Q4_0, Q8_0, Q4_K, IQ4_NL); others (Q4_1, Q5_0, Q5_1) run on the plain, slower path. A slow
file can be rewritten once into a fast format: requantizing needs `allow_requantize`, since the
source tensors are already quantized.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import engine.llama.llama_first  # noqa: F401  # pyright: ignore[reportUnusedImport]  (llama.cpp before numpy)
from engine.errors import EngineError
from engine.llama import llama_log
from engine.rewrite.quant_formats import CANDIDATES, FAST_FORMATS, candidates_for, is_fast

__all__ = ["CANDIDATES", "FAST_FORMATS", "candidates_for", "is_fast", "requantize"]

# llama_ftype ids (llama.h) of the formats Ember writes.
FTYPES: dict[str, int] = {"Q4_0": 2, "Q8_0": 7, "BF16": 32}


class RequantizeError(EngineError):
    """llama.cpp could not write the new file."""


def requantize(source: Path, target: Path, fmt: str, threads: int = 0) -> None:
    """Write `source` as `fmt` into `target` (whole file, then renamed into place)."""
    import llama_cpp as lc

    llama_log.install()  # the per-tensor listing goes to the log, not the terminal
    params = lc.llama_model_quantize_default_params()
    params.ftype = FTYPES[fmt]
    params.allow_requantize = True
    params.nthread = threads
    partial = target.with_name(target.name + ".part")
    code = lc.llama_model_quantize(str(source).encode(), str(partial).encode(), ctypes.pointer(params))
    if code != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        raise RequantizeError(f"llama.cpp could not write {fmt} from {source.name} (code {code})")
    partial.replace(target)
