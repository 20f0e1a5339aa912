"""Indexing speed (issue #50): the default embedder as Q8_0, its window, and the cores it takes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import llama_cpp
import numpy as np
import pytest

import engine.docs.embed as embed
from engine.docs.default_q8 import FILENAME, default_q8
from engine.docs.embed import DEFAULT_EMBEDDER, LlamaEmbedder, embedding_threads, reply_streaming, shared_embedder
from models.library import default_embedder

REFERENCE = Path(__file__).parent / "data" / "minilm_reference.json"


@pytest.mark.slow
def test_the_default_is_q8_0_within_cosine_0_99_of_f16_and_of_sentence_transformers() -> None:
    f16 = default_embedder.default_embedder_path()
    q8 = shared_embedder(DEFAULT_EMBEDDER)
    assert Path(q8.name).name == FILENAME and q8.max_tokens == embed.DEFAULT_WINDOW
    llama: Any = q8.llama
    assert llama.context_params.flash_attn_type == llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED  # ×1.25 passages/s
    assert Path(q8.name).stat().st_size < f16.stat().st_size * 0.6
    ref = json.loads(REFERENCE.read_text())
    half = LlamaEmbedder.load(f16, max_tokens=embed.DEFAULT_WINDOW)
    try:
        a, b = half.embed(ref["sentences"]), q8.embed(ref["sentences"])
    finally:
        half.close()
    assert np.einsum("ij,ij->i", a, b).min() >= 0.99
    assert np.einsum("ij,ij->i", b, np.asarray(ref["vectors"], dtype=np.float32)).min() >= 0.99


@pytest.mark.slow
def test_the_q8_copy_is_made_again_when_it_does_not_match_its_record(tmp_path: Path) -> None:
    f16 = default_embedder.default_embedder_path()
    own = tmp_path / f16.name
    own.write_bytes(f16.read_bytes())
    q8 = default_q8(own)
    good = default_embedder.sha256(q8)
    assert q8.name == FILENAME and default_embedder.read_record(q8) == good
    with q8.open("r+b") as f:
        f.seek(q8.stat().st_size // 2)
        f.write(b"\x00\x01\x02\x03")
    assert default_q8(own) == q8 and default_embedder.sha256(q8) == good
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([own.name, FILENAME, FILENAME + ".sha256"])


def test_when_the_q8_copy_cannot_be_written_the_f16_file_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.backends import requantize

    def full_disk(source: Path, target: Path, fmt: str, threads: int = 0) -> None:
        raise requantize.RequantizeError("llama.cpp could not write Q8_0 (code 1)")

    monkeypatch.setattr(requantize, "requantize", full_disk)
    f16 = tmp_path / "all-MiniLM-L6-v2.f16.gguf"
    f16.write_bytes(b"GGUF")
    assert default_q8(f16) == f16
    assert [p.name for p in tmp_path.iterdir()] == [f16.name]  # nothing half-written is left


def test_indexing_takes_the_idle_cores_and_leaves_a_streaming_reply_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("engine.backends.cpu_threads.default_threads", lambda: 3)
    assert embedding_threads(load=0.2, cores=8) == 8  # a quiet machine: every core
    assert embedding_threads(load=5.0, cores=8) == 3  # five busy
    assert embedding_threads(load=12.0, cores=2) == 1  # the shared 2-core machine: one, never none
    with reply_streaming():
        assert embedding_threads(load=0.0, cores=8) == 5  # the chat model keeps its 3
        with reply_streaming():
            assert embedding_threads(load=0.0, cores=8) == 5
    assert embedding_threads(load=0.0, cores=8) == 8
