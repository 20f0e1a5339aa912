"""Ember's ggml type table (kept so reading a header needs no numpy) agrees with the `gguf` package's."""

from __future__ import annotations

import gguf

from models.gguf.ggml_types import FILE_TYPES, GGML_TYPES, file_type_name, ggml_type_name, quant_sizes, tensor_nbytes

# ggml's block_q8_1 holds two f16 scales (36 bytes) since llama.cpp moved off f32 ones; the PyPI
# gguf package still says 40. Q8_1 only exists inside matrix products, never in a GGUF file.
KNOWN_STALE_IN_GGUF = {"Q8_1": (32, 36)}


def test_every_type_gguf_knows_has_the_same_name_and_block_sizes_here() -> None:
    for t, (block, size) in gguf.GGML_QUANT_SIZES.items():
        expected = (t.name, *KNOWN_STALE_IN_GGUF.get(t.name, (int(block), int(size))))
        assert GGML_TYPES.get(int(t)) == expected, t.name
    assert quant_sizes()[int(gguf.GGMLQuantizationType.Q4_K)] == gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType.Q4_K]


def test_every_file_type_gguf_knows_has_the_same_label_here() -> None:
    for t in gguf.LlamaFileType:
        expected = "F32" if t.name == "ALL_F32" else t.name.removeprefix("MOSTLY_")
        assert FILE_TYPES.get(int(t)) == expected, t.name
        assert file_type_name(int(t)) == expected


def test_unknown_ids_are_named_not_raised() -> None:
    assert ggml_type_name(99) == "type 99"
    assert file_type_name(999) == "file type 999"


def test_tensor_sizes_follow_whole_blocks() -> None:
    assert tensor_nbytes(int(gguf.GGMLQuantizationType.Q4_1), (64, 3)) == 2 * 3 * 20
    assert tensor_nbytes(int(gguf.GGMLQuantizationType.Q4_1), (48, 3)) is None  # not whole blocks
    assert tensor_nbytes(int(gguf.GGMLQuantizationType.F16), (5, 7)) == 70
