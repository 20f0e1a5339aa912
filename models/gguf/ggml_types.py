"""GGML tensor type sizes and GGUF file-type names, kept here so reading a header needs no numpy.

The `gguf` package has the same tables, but importing it imports numpy, and numpy loaded
before llama.cpp's shared libraries crashes GPU model loads on some machines (issue #15:
a segfault in `llama_model_load_from_file` on CUDA; llama-cpp-python #1581, #1903 on
Windows). The tables are small and change only when ggml adds a type; a test checks them
against the installed `gguf` package's own tables.
"""

from __future__ import annotations

# ggml type id -> (name, elements per block, bytes per block), from ggml.h / gguf-py's
# GGML_QUANT_SIZES as vendored by llama-cpp-python 0.3.36.
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 18),
    3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34),
    9: ("Q8_1", 32, 36),
    10: ("Q2_K", 256, 84),
    11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210),
    15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66),
    17: ("IQ2_XS", 256, 74),
    18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50),
    20: ("IQ4_NL", 32, 18),
    21: ("IQ3_S", 256, 110),
    22: ("IQ2_S", 256, 82),
    23: ("IQ4_XS", 256, 136),
    24: ("I8", 1, 1),
    25: ("I16", 1, 2),
    26: ("I32", 1, 4),
    27: ("I64", 1, 8),
    28: ("F64", 1, 8),
    29: ("IQ1_M", 256, 56),
    30: ("BF16", 1, 2),
    34: ("TQ1_0", 256, 54),
    35: ("TQ2_0", 256, 66),
    39: ("MXFP4", 32, 17),
    40: ("NVFP4", 64, 36),
    41: ("Q1_0", 128, 18),
    42: ("Q2_0", 64, 18),
}

# llama_ftype (llama.h) -> the quantization label people use (`MOSTLY_` dropped).
FILE_TYPES: dict[int, str] = {
    0: "F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    7: "Q8_0",
    8: "Q5_0",
    9: "Q5_1",
    10: "Q2_K",
    11: "Q3_K_S",
    12: "Q3_K_M",
    13: "Q3_K_L",
    14: "Q4_K_S",
    15: "Q4_K_M",
    16: "Q5_K_S",
    17: "Q5_K_M",
    18: "Q6_K",
    19: "IQ2_XXS",
    20: "IQ2_XS",
    21: "Q2_K_S",
    22: "IQ3_XS",
    23: "IQ3_XXS",
    24: "IQ1_S",
    25: "IQ4_NL",
    26: "IQ3_S",
    27: "IQ3_M",
    28: "IQ2_S",
    29: "IQ2_M",
    30: "IQ4_XS",
    31: "IQ1_M",
    32: "BF16",
    36: "TQ1_0",
    37: "TQ2_0",
    38: "MXFP4_MOE",
    39: "NVFP4",
    40: "Q1_0",
    41: "Q2_0",
    1024: "GUESSED",
}


_QUANT_SIZES: dict[int, tuple[int, int]] = {t: (block, size) for t, (_, block, size) in GGML_TYPES.items()}


def quant_sizes() -> dict[int, tuple[int, int]]:
    """ggml type id -> (elements per block, bytes per block)."""
    return _QUANT_SIZES


def ggml_type_name(type_id: int) -> str:
    """`Q4_K` for 12; `type 99` for an id this table does not know."""
    entry = GGML_TYPES.get(type_id)
    return entry[0] if entry else f"type {type_id}"


def file_type_name(file_type: int) -> str:
    """The quantization label of `general.file_type`: 3 -> `Q4_1`, 0 -> `F32`."""
    return FILE_TYPES.get(file_type, f"file type {file_type}")


def tensor_nbytes(type_id: int, shape: tuple[int, ...]) -> int | None:
    """Bytes a tensor of this type and shape occupies, or None if the shape is invalid.

    ggml stores rows in whole blocks, so the first dimension must be a multiple of the
    block size (llama.cpp rejects the file otherwise).
    """
    _, block, size = GGML_TYPES[type_id]
    if not shape or shape[0] % block:
        return None
    n = 1
    for d in shape:
        n *= d
    return n // block * size
