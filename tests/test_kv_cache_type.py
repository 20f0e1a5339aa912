"""The KV cache type setting: estimate, offload fit, settings, the refusal line and a real load."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from engine.backends.base import Sampling, StreamInfo, make_request
from engine.cancel import CancelToken
from engine.errors import ConfigError, ModelLoadError
from engine.events import Piece
from engine.llama.offload import ALL_LAYERS, layers_that_fit
from engine.session.settings import Overrides, resolve
from models.gguf.meta import read_metadata
from models.library.memory import estimate_memory, kv_cache_bytes, kv_cache_problem
from models.library.settings import ModelSettings, load_model_settings, load_options, save_model_settings
from tests import gguf_factory as gf


def test_a_quantized_cache_is_estimated_at_its_block_size(smollm_path: Path) -> None:
    meta = read_metadata(smollm_path)
    f16 = kv_cache_bytes(meta, 4096)
    assert kv_cache_bytes(meta, 4096, "q8_0") == f16 * 34 // 64  # 32 values in 34 bytes
    assert kv_cache_bytes(meta, 4096, "q4_0") == f16 * 18 // 64  # 32 values in 18 bytes
    est = estimate_memory(meta, 4096, available=None, kv_cache="q8_0")
    assert est.kv_cache_bytes == kv_cache_bytes(meta, 4096, "q8_0") and est.kv_cache == "q8_0"


def test_a_smaller_cache_lets_more_layers_fit_on_the_gpu(smollm_path: Path) -> None:
    meta = read_metadata(smollm_path)
    free = 900 * (1 << 20) + meta.size_bytes // 2 + kv_cache_bytes(meta, 32768) // 2  # about half the layers, f16
    f16 = layers_that_fit(meta, 32768, free)
    q4 = layers_that_fit(meta, 32768, free, "q4_0")
    assert 0 < f16 < n_layer(meta)
    assert q4 == ALL_LAYERS or q4 > f16  # -1: all of them


def n_layer(meta) -> int:  # type: ignore[no-untyped-def]
    return int(meta.block_count)


def test_unsupported_combinations_are_one_line(tmp_path: Path, smollm_path: Path) -> None:
    meta = read_metadata(smollm_path)
    assert kv_cache_problem(meta, "f16") is None and kv_cache_problem(meta, "q8_0") is None
    no_fa = kv_cache_problem(meta, "q4_0", flash_attn=False)
    assert no_fa is not None and "flash attention" in no_fa
    odd = read_metadata(gf.write_tiny_llama(tmp_path / "odd.gguf", n_embd=80, n_head=4))  # 20-wide heads
    problem = kv_cache_problem(odd, "q8_0")
    assert problem is not None and "20" in problem and "\n" not in problem
    assert kv_cache_problem(odd, "f16") is None
    assert "unknown KV cache type" in (kv_cache_problem(meta, "q2_k") or "")


def test_the_setting_is_saved_read_and_overridden(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    save_model_settings(model, ModelSettings(kv_cache="q8_0", prompt_lookup=False, draft_model="/d.gguf"))
    saved = load_model_settings(model)
    assert (saved.kv_cache, saved.prompt_lookup, saved.draft_model) == ("q8_0", False, "/d.gguf")
    assert resolve(saved, Overrides(kv_cache="q4_0")).model.kv_cache == "q4_0"
    options = load_options(saved)
    assert options["kv_cache"] == "q8_0" and options["prompt_lookup"] is False
    assert options["draft_model"] == Path("/d.gguf")
    with pytest.raises(ValueError, match="kv_cache"):
        ModelSettings(kv_cache="q3")
    with pytest.raises(ConfigError, match="kv_cache"):
        resolve(saved, Overrides(kv_cache="q3"))
    assert ModelSettings.from_json({"kv_cache": "bogus"}).kv_cache == "f16"  # a bad stored value: the default


def test_ember_chat_takes_the_kv_cache_flag() -> None:
    from desktop.cli.main import build_parser  # pyright: ignore[reportUnknownVariableType]

    args = build_parser().parse_args(["chat", "hi", "--kv-cache", "q4_0"])
    assert isinstance(args, argparse.Namespace) and args.kv_cache == "q4_0"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["chat", "hi", "--kv-cache", "q5"])


@pytest.mark.slow  # loads the real model (tests/slow_marks.py)
def test_smollm2_runs_with_a_q8_0_cache_and_a_bad_combination_is_refused(smollm_path: Path) -> None:
    from engine.llama.llama import LlamaBackend

    backend = LlamaBackend(smollm_path, n_ctx=512, n_threads=1, kv_cache="q8_0")
    try:
        info = StreamInfo()
        request = make_request([{"role": "user", "content": "Hi"}], sampling=Sampling.greedy(), max_tokens=4)
        text = "".join(p.text for p in backend.stream(request, CancelToken(), info) if isinstance(p, Piece))
        assert text and info.completion_tokens > 0
    finally:
        backend.close()
    with pytest.raises(ModelLoadError) as err:
        LlamaBackend(smollm_path, n_ctx=512, kv_cache="q4_0", flash_attn=False)
    assert "flash attention" in str(err.value) and "\n" not in str(err.value)
