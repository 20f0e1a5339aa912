"""GGUF header metadata: the real SmolLM2, synthetic families, and hostile files."""

from __future__ import annotations

import os
import random
import shutil
import struct
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import gguf
import gguf_factory as gf
import numpy as np
import pytest

from models.errors import GGUFError
from models.formats import MarkerKind
from models.gguf.diagnose import explain_load_failure
from models.gguf.header import read_header, read_magic
from models.gguf.meta import format_parameters, read_metadata
from models.gguf.templates import TemplateFamily, detect_family, thinking_prefill

# --- the real built-in model -------------------------------------------------------------


def test_smollm2_metadata(smollm_path: Path) -> None:
    meta = read_metadata(smollm_path)
    assert meta.architecture == "llama"
    assert meta.quantization == "Q4_1"
    assert meta.n_ctx_train == 8192
    assert meta.template_family is TemplateFamily.CHATML
    assert meta.size_label == "135M"
    assert (meta.block_count, meta.embedding_length, meta.head_count, meta.head_count_kv) == (30, 576, 9, 3)
    assert meta.vocab_size == 49152
    assert meta.file_size == meta.size_bytes == smollm_path.stat().st_size
    assert (meta.bos_token, meta.eos_token) == ("<|im_start|>", "<|im_end|>")
    assert meta.parameters > 100_000_000
    assert not meta.is_projector
    assert meta.chat_template is not None
    assert "<|im_start|>" in meta.chat_template


def test_smollm2_profile(smollm_path: Path) -> None:
    meta = read_metadata(smollm_path)
    assert meta.template_family is TemplateFamily.CHATML
    assert meta.thinking_prefill is False
    assert meta.markers == ()  # SmolLM2 has no thinking or tool tokens
    assert meta.eos_token == "<|im_end|>"
    assert explain_load_failure(smollm_path) is None


def test_reader_agrees_with_gguf_package(tmp_path: Path) -> None:
    path = gf.write_tiny_llama(tmp_path / "tiny.gguf", gf.QWEN3_THINKING, gf.QWEN3_TOKENS)
    ours = read_header(path)
    theirs = gguf.GGUFReader(path)
    assert len(ours.tensors) == len(theirs.tensors)
    for mine, ref in zip(ours.tensors, theirs.tensors, strict=True):
        assert (mine.name, mine.n_bytes, mine.ggml_type) == (ref.name, int(ref.n_bytes), int(ref.tensor_type))
        assert ours.data_offset + mine.offset == int(ref.data_offset)
    assert ours.tokens is not None
    assert [t.decode() for t in ours.tokens] == theirs.fields["tokenizer.ggml.tokens"].contents()
    assert ours.kv["tokenizer.chat_template"] == theirs.fields["tokenizer.chat_template"].contents()
    assert ours.kv["llama.context_length"] == 2048


# --- template families ------------------------------------------------------------------

FAMILY_CASES = [
    ("chatml", gf.CHATML, gf.CHATML_TOKENS, TemplateFamily.CHATML, False, set[str]()),
    ("llama3", gf.LLAMA3, gf.LLAMA3_TOKENS, TemplateFamily.LLAMA3, False, {"<|python_tag|>", "<|eom_id|>"}),
    ("gemma", gf.GEMMA, gf.GEMMA_TOKENS, TemplateFamily.GEMMA, False, set[str]()),
    ("qwen3-hybrid", gf.QWEN3_HYBRID, gf.QWEN3_TOKENS, TemplateFamily.QWEN3_THINKING, False,
     {"<think>", "</think>", "<tool_call>", "</tool_call>"}),
    ("qwen3-thinking", gf.QWEN3_THINKING, gf.QWEN3_TOKENS, TemplateFamily.QWEN3_THINKING, True,
     {"<think>", "</think>", "<tool_call>", "</tool_call>"}),
    ("harmony", gf.HARMONY, gf.HARMONY_TOKENS, TemplateFamily.HARMONY, False,
     {"<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|return|>", "<|call|>", "<|constrain|>"}),
    ("mistral", gf.MISTRAL, gf.MISTRAL_TOKENS, TemplateFamily.MISTRAL, False, {"[TOOL_CALLS]", "[THINK]", "[/THINK]"}),
    ("lfm2", gf.LFM2, gf.LFM2_TOKENS, TemplateFamily.LFM2, False,
     {"<|tool_call_start|>", "<|tool_call_end|>", "<think>", "</think>"}),
    ("deepseek-r1", gf.DEEPSEEK_R1, (), TemplateFamily.DEEPSEEK, True, set[str]()),
    ("phi3", gf.PHI3, (), TemplateFamily.PHI, False, set[str]()),
    ("none", None, (), TemplateFamily.NONE, False, set[str]()),
    ("generic", "{{ messages[0]['content'] }}", (), TemplateFamily.GENERIC, False, set[str]()),
]  # fmt: skip


@pytest.mark.parametrize(
    ("template", "tokens", "family", "prefill", "markers"),
    [pytest.param(*case[1:], id=case[0]) for case in FAMILY_CASES],
)
def test_template_families(
    tmp_path: Path,
    template: str | None,
    tokens: tuple[gf.TokenSpec, ...],
    family: TemplateFamily,
    prefill: bool,
    markers: set[str],
) -> None:
    meta = read_metadata(gf.write_tiny_llama(tmp_path / "m.gguf", template, tokens))
    assert meta.template_family is family
    assert meta.thinking_prefill is prefill
    assert {m.text for m in meta.markers} == markers
    assert meta.chat_template == template
    assert meta.bos_token == "<s>"


def test_marker_tokens_carry_ids_types_and_kinds(tmp_path: Path) -> None:
    path = gf.write_tiny_llama(tmp_path / "q.gguf", gf.QWEN3_THINKING, gf.QWEN3_TOKENS, eos="<|im_end|>")
    meta = read_metadata(path)
    by_text = {m.text: m for m in meta.markers}
    assert by_text["<think>"].token_type == "USER_DEFINED"
    assert by_text["<think>"].kind is MarkerKind.THINKING
    assert by_text["<tool_call>"].kind is MarkerKind.TOOL_CALL
    assert read_header(path).tokens[by_text["</think>"].token_id] == b"</think>"  # type: ignore[index]
    assert meta.eos_token == "<|im_end|>"
    harmony = read_metadata(gf.write_tiny_llama(tmp_path / "h.gguf", gf.HARMONY, gf.HARMONY_TOKENS))
    assert {m.token_type for m in harmony.markers} == {"CONTROL"}


@pytest.mark.parametrize(
    ("text", "family"),
    [
        ("<|im_start|>user<|im_sep|>", TemplateFamily.PHI),
        ("<|start_of_role|>user<|end_of_role|>", TemplateFamily.GRANITE),
        ("<|START_OF_TURN_TOKEN|><|USER_TOKEN|>", TemplateFamily.COMMAND_R),
        ("[gMASK]<sop><|user|>", TemplateFamily.GLM),
        ("<seed:bos>user", TemplateFamily.SEED_OSS),
        ("[INST] <<SYS>>\n", TemplateFamily.LLAMA2),
        ("<|startoftext|><|im_start|>user", TemplateFamily.LFM2),
        ("   ", TemplateFamily.NONE),
    ],
)
def test_detect_family_from_text(text: str, family: TemplateFamily) -> None:
    assert detect_family(text) is family


def test_thinking_prefill_needs_an_unclosed_opener_after_the_generation_prompt() -> None:
    assert thinking_prefill("{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n<think>\\n' }}{% endif %}")
    assert thinking_prefill('{% if add_generation_prompt %}{{ "<seed:think>" }}{% endif %}')
    assert not thinking_prefill("{% if add_generation_prompt %}{{ '<think>\\n\\n</think>\\n\\n' }}{% endif %}")
    assert not thinking_prefill("{{ '<think>' }}{% if add_generation_prompt %}{{ 'assistant' }}{% endif %}")
    assert not thinking_prefill(None)


# --- derived values ---------------------------------------------------------------------


def test_parameters_and_size_label_without_general_size_label(tmp_path: Path) -> None:
    meta = read_metadata(gf.write_tiny_llama(tmp_path / "m.gguf"))
    assert meta.parameters == sum(t.n_elements for t in read_header(meta.path).tensors)
    assert meta.size_label == format_parameters(meta.parameters) == "121K"
    assert meta.quantization == "F32"
    assert format_parameters(7_240_000_000) == "7.2B"
    assert format_parameters(8_000_000_000) == "8B"
    assert format_parameters(135_000_000) == "135M"


def test_quantization_falls_back_to_the_dominant_tensor_type(tmp_path: Path) -> None:
    w = gguf.GGUFWriter(tmp_path / "f16.gguf", "llama")
    w.add_tensor("a.weight", np.zeros((4, 32), dtype=np.float16))
    w.add_tensor("n.weight", np.zeros(32, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    assert read_metadata(tmp_path / "f16.gguf").quantization == "F16"


def test_per_layer_kv_heads(tmp_path: Path) -> None:
    # A hybrid model: layer 1 has no attention (0 KV heads); the header stores an array.
    path = gf.write_tiny_llama(tmp_path / "m.gguf", extra={"llama.attention.head_count_kv": [2, 0]})
    meta = read_metadata(path)
    assert meta.head_count_kv_layers == (2, 0)
    assert meta.head_count_kv == 2


def test_split_model_counts_every_shard_but_checks_only_its_own_data(tmp_path: Path) -> None:
    first = gf.write_tiny_llama(tmp_path / "big.gguf", split_max_tensors=8)
    shards = sorted(tmp_path.glob("big-*-of-*.gguf"))
    assert first == shards[0]
    assert len(shards) == 3
    meta = read_metadata(first)
    assert meta.shard_count == 3
    assert meta.missing_shards == ()
    assert meta.size_bytes == sum(p.stat().st_size for p in shards)
    whole = read_metadata(gf.write_tiny_llama(tmp_path / "whole.gguf"))
    assert meta.parameters == whole.parameters
    # Cutting shard 3 short does not make shard 1 unreadable; shard 3 itself is truncated.
    os.truncate(shards[2], shards[2].stat().st_size - 64)
    assert read_metadata(first).missing_shards == (3,)
    with pytest.raises(GGUFError, match="truncated"):
        read_header(shards[2])
    assert "missing shard 3 of 3" in (explain_load_failure(first) or "")
    assert "open the first" in (explain_load_failure(shards[1]) or "")


@pytest.mark.slow
def test_the_header_of_a_multi_gb_150k_vocab_model_is_read(tmp_path: Path) -> None:
    path = gf.write_big_vocab_model(tmp_path / "big.gguf")
    assert path.stat().st_size > 3_000_000_000  # sparse: claims GBs, uses little
    # How long it takes is a figure, not a test (it hit 801 ms against an 800 ms limit in a CI run).
    read_metadata(path)  # warm the page cache
    t0 = time.perf_counter()
    meta = read_metadata(path)
    print(f"header read, 150k vocab + 150k merges: {(time.perf_counter() - t0) * 1000:.0f} ms")
    assert (meta.vocab_size, meta.quantization) == (150_000, "Q4_K_M")
    assert {m.text for m in meta.markers} == {"<think>", "</think>"}


@pytest.mark.slow
def test_tiny_llama_loads_in_llama_cpp(tmp_path: Path) -> None:
    llama_cpp = pytest.importorskip("llama_cpp")
    path = gf.write_tiny_llama(tmp_path / "tiny.gguf", gf.QWEN3_THINKING, gf.QWEN3_TOKENS, eos="<|im_end|>")
    from engine.llama.cpu import ensure_backends

    ensure_backends()  # a build with run-time CPU variants registers none until one is chosen
    llm = llama_cpp.Llama(str(path), n_ctx=128, verbose=False)
    try:
        assert llm.tokenize(b"<think>", add_bos=False, special=True) == [read_metadata(path).markers[0].token_id]
        out = llm.create_completion("Hello", max_tokens=4)
        assert out["choices"][0]["finish_reason"] in ("length", "stop")
    finally:
        llm.close()


# --- hostile files -----------------------------------------------------------------------

U32, STRING, ARRAY = 4, 8, 9
ARCH = gf.raw_kv_str("general.architecture", "llama")
HUGE = 1 << 60
PAD = b"\0" * 64  # enough bytes for the declared counts to be plausible


def _f32_tensor(name: str = "t.weight", shape: tuple[int, ...] = (32, 4), offset: int = 0) -> bytes:
    return gf.raw_tensor_info(name, shape, 0, offset)


HOSTILE: dict[str, tuple[bytes, str]] = {
    "zero-bytes": (b"", "empty file"),
    "three-bytes": (b"GGU", "not a GGUF file"),
    "wrong-magic": (b"PK\x03\x04" + b"\0" * 60, "wrong magic"),
    "bad-version": (gf.raw_gguf([ARCH], version=99), "unsupported GGUF version 99"),
    "version-1": (gf.raw_gguf([ARCH], version=1), "unsupported GGUF version 1"),
    "big-endian": (b"GGUF" + struct.pack(">IQQ", 3, 0, 0), "big-endian"),
    "huge-key-count": (gf.raw_gguf([ARCH], n_kv=HUGE), "metadata keys, more than the file could hold"),
    "huge-tensor-count": (gf.raw_gguf([ARCH], n_tensors=1 << 40), "tensors, more than the file could hold"),
    "huge-key-length": (gf.raw_gguf([gf.raw_str("k", declared=HUGE)]) + PAD, "truncated"),
    "huge-string-value": (gf.raw_gguf([gf.raw_kv_str("general.name", "x", declared=HUGE)]), "truncated"),
    "huge-u32-array": (gf.raw_gguf([gf.raw_kv_array("a", U32, HUGE, b"\0" * 16)]), "truncated"),
    "huge-string-array": (gf.raw_gguf([gf.raw_kv_array("tokenizer.ggml.tokens", STRING, HUGE)]), "truncated"),
    "huge-string-in-array": (
        gf.raw_gguf([gf.raw_kv_array("tokenizer.ggml.tokens", STRING, 2, gf.raw_str("a", declared=HUGE))]),
        "truncated",
    ),
    "cut-mid-key": (gf.raw_gguf([ARCH])[:-3], "truncated"),
    "unknown-value-type": (gf.raw_gguf([gf.raw_str("k") + struct.pack("<I", 99)]), "unknown value type 99"),
    "nested-array": (gf.raw_gguf([gf.raw_kv_array("a", ARRAY, 1, b"\0" * 16)]), "nested arrays"),
    "duplicate-key": (gf.raw_gguf([ARCH, ARCH]), "duplicate metadata key"),
    "no-architecture": (gf.raw_gguf([gf.raw_kv_str("general.name", "x")]), "general.architecture"),
    "bad-alignment": (gf.raw_gguf([ARCH, gf.raw_kv_u32("general.alignment", 3)]), "power of two"),
    "too-many-dims": (gf.raw_gguf([ARCH], [gf.raw_tensor_info("t", (1,) * 9, 0, 0)]), "9 dimensions"),
    "unknown-tensor-type": (gf.raw_gguf([ARCH], [gf.raw_tensor_info("t", (32,), 99, 0)]), "unknown ggml type 99"),
    "absurd-shape": (gf.raw_gguf([ARCH], [gf.raw_tensor_info("t", (1 << 62, 2), 0, 0)]), "absurd shape"),
    "bad-block-shape": (gf.raw_gguf([ARCH], [gf.raw_tensor_info("t", (31,), 2, 0)]), "Q4_0 blocks"),
    "misaligned-offset": (gf.raw_gguf([ARCH], [_f32_tensor(offset=5)], data=b"\0" * 1024), "not aligned"),
    "long-tensor-name": (gf.raw_gguf([ARCH], [_f32_tensor(name="n" * 80)]), "longer than 63 bytes"),
    "duplicate-tensor": (gf.raw_gguf([ARCH], [_f32_tensor(), _f32_tensor()], data=b"\0" * 512), "duplicate tensor"),
    "data-past-end": (gf.raw_gguf([ARCH], [_f32_tensor()], data=b"\0" * 100), "truncated: tensor data ends"),
    "huge-tensor": (gf.raw_gguf([ARCH], [_f32_tensor(shape=(1 << 40, 1 << 20))], data=b"\0" * 32), "truncated"),
}


def _assert_quick_and_small(fn: Callable[[], object]) -> GGUFError:
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        fn()
    except GGUFError as exc:
        error = exc
    else:
        raise AssertionError("no GGUFError")
    finally:
        elapsed = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert elapsed < 5, elapsed  # a guard against reading what a header declares (minutes), not a target
    assert peak < 8 << 20, peak  # never allocates what a header declares
    return error


@pytest.mark.parametrize(("content", "expected"), list(HOSTILE.values()), ids=list(HOSTILE))
def test_hostile_headers_fail_fast_with_one_line(tmp_path: Path, content: bytes, expected: str) -> None:
    path = gf.write_raw(tmp_path / "bad.gguf", content)
    error = _assert_quick_and_small(lambda: read_metadata(path))
    assert expected in str(error)
    assert "\n" not in str(error)
    assert len(str(error)) <= 300
    assert error.path == path
    assert explain_load_failure(path) == error.reason


def test_missing_and_directory(tmp_path: Path) -> None:
    with pytest.raises(GGUFError, match="no such file"):
        read_metadata(tmp_path / "nope.gguf")
    with pytest.raises(GGUFError, match="is a directory"):
        read_metadata(tmp_path)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.gguf"
    os.mkfifo(fifo)
    with pytest.raises(GGUFError, match="not a regular file"):
        read_metadata(fifo)  # must not block waiting for a writer
    assert not read_magic(fifo)


def test_unreadable_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = gf.write_tiny_llama(tmp_path / "locked.gguf")
    if getattr(os, "geteuid", lambda: -1)() == 0:  # root reads anything: simulate the refusal at the OS edge

        def refuse(self: Path, *args: object, **kwargs: object) -> object:
            raise PermissionError(13, "Permission denied")

        monkeypatch.setattr(Path, "open", refuse)
    else:
        path.chmod(0)
    with pytest.raises(GGUFError, match="permission denied"):
        read_metadata(path)


def test_truncated_real_model(tmp_path: Path, smollm_path: Path) -> None:
    cut = tmp_path / "cut.gguf"
    with smollm_path.open("rb") as src, cut.open("wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
        dst.truncate(3 << 20)  # the header is intact, most weights are not there
    reason = explain_load_failure(cut)
    assert reason is not None
    assert reason.startswith("truncated: tensor data ends")
    header_cut = gf.write_raw(tmp_path / "hcut.gguf", smollm_path.read_bytes()[:500_000])  # inside the vocabulary
    assert (explain_load_failure(header_cut) or "").startswith("truncated")


def test_unsupported_architecture_and_projector(tmp_path: Path) -> None:
    w = gguf.GGUFWriter(tmp_path / "odd.gguf", "notanarch")
    w.add_tensor("x.weight", np.zeros(32, dtype=np.float32))
    w.add_token_list(["a"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    assert explain_load_failure(tmp_path / "odd.gguf") == (
        "unsupported architecture 'notanarch' (llama.cpp in llama-cpp-python 0.3.36 does not know it)"
    )
    projector = gf.write_projector(tmp_path / "vision.gguf")
    assert read_metadata(projector).is_projector
    assert "vision projector" in (explain_load_failure(projector) or "")


def test_random_corruption_only_ever_raises_gguf_error(tmp_path: Path) -> None:
    good = gf.write_tiny_llama(tmp_path / "good.gguf").read_bytes()
    rng = random.Random(1234)
    path = tmp_path / "fuzz.gguf"
    reasons: list[str] = []
    for _ in range(300):
        data = bytearray(good[: rng.randrange(len(good) + 1)] if rng.random() < 0.3 else good)
        for _ in range(rng.randrange(1, 6)):
            if data:
                i = rng.randrange(min(len(data), 12_000))  # the header, where lengths live
                data[i] = rng.randrange(256)
        path.write_bytes(data)
        try:
            read_metadata(path)
        except GGUFError as exc:  # anything else (IndexError, MemoryError…) fails the test
            reasons.append(str(exc))
    assert reasons
    assert all("\n" not in r for r in reasons)


def test_overlong_strings_are_skipped_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = gf.write_tiny_llama(tmp_path / "m.gguf", gf.QWEN3_THINKING, gf.QWEN3_TOKENS)
    monkeypatch.setattr("models.gguf.header.MAX_KEPT_STRING", 8)
    header = read_header(path)
    assert header.tokens is not None
    assert header.tokens[1] == b"<s>"
    assert header.tokens[259] == b""  # "<|im_start|>" is 12 bytes: stepped over, id kept
    assert header.tokens[261] == b"<think>"
    assert read_metadata(path).chat_template is None  # the template too


def test_kept_metadata_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = gf.write_tiny_llama(tmp_path / "m.gguf")
    monkeypatch.setattr("models.gguf.header.MAX_KEPT_TOTAL", 4000)
    with pytest.raises(GGUFError, match="more metadata than Ember keeps in memory"):
        read_header(path)
