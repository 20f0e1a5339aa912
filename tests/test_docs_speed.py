"""Indexing speed (issue #50): the default embedder in the CPU's fastest format, its window, and the cores it takes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import llama_cpp
import numpy as np
import pytest

import engine.docs.embed as embed
from engine.docs.default_format import FILENAMES, copy_path, cpu_format, default_copy, fastest_format
from engine.docs.embed import DEFAULT_EMBEDDER, LlamaEmbedder, embedding_threads, reply_streaming, shared_embedder
from models.library import default_embedder

REFERENCE = Path(__file__).parent / "data" / "minilm_reference.json"

# llama_print_system_info() of llama.cpp's CPU variants, as they read on the Zen 4 test machine
ZEN4 = (
    "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | AVX512 = 1 | "
    "AVX512_VBMI = 1 | AVX512_VNNI = 1 | AVX512_BF16 = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 | "
)
ICELAKE = ZEN4.replace("AVX512_BF16 = 1 | ", "")
HASWELL = "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | LLAMAFILE = 1 | "


@pytest.mark.parametrize(
    ("features", "fmt"),
    [
        (ZEN4, "BF16"),  # one-instruction BF16 dot products: x1.2-1.4 Q8_0 (docs/performance.md)
        (ICELAKE, "Q8_0"),  # AVX-512 without BF16: Q8_0 and f16 alike, Q8_0 a little ahead
        (HASWELL, "F16"),  # AVX2 alone: f16 x1.27 Q8_0
        (ZEN4 + "AMX_INT8 = 1 | ", "Q8_0"),  # llama.cpp's AMX kernels take Q8_0
        (ZEN4.replace("AVX512_BF16 = 1", "AVX512_BF16 = 0"), "Q8_0"),  # a feature read as 0 is absent
        ("CUDA : ARCHS = 890 | CPU : NEON = 1 | ARM_FMA = 1 | DOTPROD = 1 | MATMUL_INT8 = 1 | ", "Q8_0"),
        ("", "Q8_0"),
    ],
)
def test_the_default_format_follows_the_cpu_kernels(features: str, fmt: str) -> None:
    assert fastest_format(features) == fmt


def test_f16_is_the_checked_file_itself_and_nothing_is_written(tmp_path: Path) -> None:
    f16 = tmp_path / "all-MiniLM-L6-v2.f16.gguf"
    f16.write_bytes(b"GGUF")
    assert copy_path(f16, "F16") == f16 and default_copy(f16, "F16") == f16
    assert [p.name for p in tmp_path.iterdir()] == [f16.name]


@pytest.mark.slow
def test_the_default_is_the_cpus_format_within_cosine_0_99_of_f16_and_of_sentence_transformers() -> None:
    f16 = default_embedder.default_embedder_path()
    fmt = cpu_format()
    fast = shared_embedder(DEFAULT_EMBEDDER)
    assert Path(fast.name) == copy_path(f16, fmt) and fast.max_tokens == embed.DEFAULT_WINDOW
    llama: Any = fast.llama
    assert llama.context_params.flash_attn_type == llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED  # x1.25-2 passages/s
    if fmt != "F16":
        assert Path(fast.name).stat().st_size < f16.stat().st_size * (1.01 if fmt == "BF16" else 0.6)
    ref = json.loads(REFERENCE.read_text())
    half = LlamaEmbedder.load(f16, max_tokens=embed.DEFAULT_WINDOW)
    try:
        a, b = half.embed(ref["sentences"]), fast.embed(ref["sentences"])
    finally:
        half.close()
    assert np.einsum("ij,ij->i", a, b).min() >= 0.99
    assert np.einsum("ij,ij->i", b, np.asarray(ref["vectors"], dtype=np.float32)).min() >= 0.99


@pytest.mark.slow
def test_every_format_embeds_within_cosine_0_999_of_the_others(tmp_path: Path) -> None:
    # Why a collection embedded on one machine (or before an upgrade) is searched as it is, never
    # embedded again: its stored vectors and a query's agree whatever format each was made in.
    f16 = default_embedder.default_embedder_path()
    own = tmp_path / f16.name
    own.write_bytes(f16.read_bytes())
    sentences = json.loads(REFERENCE.read_text())["sentences"]
    vectors = []
    for fmt in ("F16", "Q8_0", "BF16"):
        model = LlamaEmbedder.load(default_copy(own, fmt), max_tokens=embed.DEFAULT_WINDOW)
        try:
            vectors.append(model.embed(sentences))
        finally:
            model.close()
    for i in range(3):
        for j in range(i):
            assert np.einsum("ij,ij->i", vectors[i], vectors[j]).min() >= 0.999


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["Q8_0", "BF16"])
def test_the_copy_is_made_again_when_it_does_not_match_its_record(tmp_path: Path, fmt: str) -> None:
    f16 = default_embedder.default_embedder_path()
    own = tmp_path / f16.name
    own.write_bytes(f16.read_bytes())
    copy = default_copy(own, fmt)
    good = default_embedder.sha256(copy)
    assert copy.name == FILENAMES[fmt] and default_embedder.read_record(copy) == good
    with copy.open("r+b") as f:
        f.seek(copy.stat().st_size // 2)
        f.write(b"\x00\x01\x02\x03")
    assert default_copy(own, fmt) == copy and default_embedder.sha256(copy) == good
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([own.name, copy.name, copy.name + ".sha256"])


def test_when_the_copy_cannot_be_written_the_f16_file_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.rewrite import requantize

    def full_disk(source: Path, target: Path, fmt: str, threads: int = 0) -> None:
        raise requantize.RequantizeError(f"llama.cpp could not write {fmt} (code 1)")

    monkeypatch.setattr(requantize, "requantize", full_disk)
    f16 = tmp_path / "all-MiniLM-L6-v2.f16.gguf"
    f16.write_bytes(b"GGUF")
    assert default_copy(f16, "BF16") == f16 and default_copy(f16, "Q8_0") == f16
    assert [p.name for p in tmp_path.iterdir()] == [f16.name]  # nothing half-written is left


def test_indexing_takes_the_idle_cores_and_leaves_a_streaming_reply_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("engine.llama.cpu_threads.default_threads", lambda: 3)
    assert embedding_threads(load=0.2, cores=8) == 8  # a quiet machine: every core
    assert embedding_threads(load=5.0, cores=8) == 3  # five busy
    assert embedding_threads(load=12.0, cores=2) == 1  # the shared 2-core machine: one, never none
    with reply_streaming():
        assert embedding_threads(load=0.0, cores=8) == 5  # the chat model keeps its 3
        with reply_streaming():
            assert embedding_threads(load=0.0, cores=8) == 5
    assert embedding_threads(load=0.0, cores=8) == 8
