"""GGML tensor type sizes and GGUF file-type names, taken from the `gguf` package.

`gguf` imports numpy (a few hundred ms), so it is imported on first use rather than when
`models` is imported: `ember --help` and the GUI's first paint should not pay for it.
"""

from __future__ import annotations

from functools import cache


@cache
def quant_sizes() -> dict[int, tuple[int, int]]:
    """ggml type id -> (elements per block, bytes per block)."""
    import gguf

    return {int(t): (int(b), int(s)) for t, (b, s) in gguf.GGML_QUANT_SIZES.items()}


@cache
def _type_names() -> dict[int, str]:
    import gguf

    return {int(t): t.name for t in gguf.GGMLQuantizationType}


@cache
def _file_type_names() -> dict[int, str]:
    import gguf

    return {int(t): t.name for t in gguf.LlamaFileType}


def ggml_type_name(type_id: int) -> str:
    """`Q4_K` for 12; `type 99` for an id this gguf package does not know."""
    return _type_names().get(type_id, f"type {type_id}")


def file_type_name(file_type: int) -> str:
    """The quantization label of `general.file_type`: 3 -> `Q4_1`, 0 -> `F32`."""
    name = _file_type_names().get(file_type)
    if name is None:
        return f"file type {file_type}"
    if name == "ALL_F32":
        return "F32"
    return name.removeprefix("MOSTLY_")


def tensor_nbytes(type_id: int, shape: tuple[int, ...]) -> int | None:
    """Bytes a tensor of this type and shape occupies, or None if the shape is invalid.

    ggml stores rows in whole blocks, so the first dimension must be a multiple of the
    block size (llama.cpp rejects the file otherwise).
    """
    block, size = quant_sizes()[type_id]
    if not shape or shape[0] % block:
        return None
    n = 1
    for d in shape:
        n *= d
    return n // block * size
