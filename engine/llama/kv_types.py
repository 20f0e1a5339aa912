"""The KV cache type setting (`f16`, `q8_0`, `q4_0`) as llama.cpp's ggml type ids."""

from __future__ import annotations

import llama_cpp.llama_cpp as ll

from engine.errors import ModelLoadError
from models.gguf.meta import ModelMetadata
from models.library.memory import kv_cache_problem

GGML_TYPES = {"f16": ll.GGML_TYPE_F16, "q8_0": ll.GGML_TYPE_Q8_0, "q4_0": ll.GGML_TYPE_Q4_0}


def kv_cache_types(kv_cache: str, meta: ModelMetadata, flash_attn: bool, name: str) -> tuple[int, int]:
    """(type_k, type_v) for llama.cpp; ModelLoadError (one line) for a combination it would refuse."""
    problem = kv_cache_problem(meta, kv_cache, flash_attn)
    if problem:
        raise ModelLoadError(f"{name}: {problem}")
    ggml = GGML_TYPES[kv_cache]
    return ggml, ggml
