"""Synthetic GGUF files for tests: tiny loadable models, templates, shards, hostile headers.

`write_tiny_llama()` writes a llama-architecture model with random f32 weights (2 layers,
64-wide) and a small SentencePiece-style vocabulary (`tokenizer.ggml.model = "llama"`:
<unk>, <s>, </s>, 256 byte tokens, printable ASCII, a few words, and any extra special
tokens you pass). llama.cpp loads it and generates (random) text from it, so other tests
can use it as a fast stand-in for a real model. Files are ~0.2 MB.

The raw helpers (`raw_gguf`, `raw_kv_*`) build headers byte by byte, for files that
`gguf.GGUFWriter` refuses to write.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gguf
import numpy as np

CONTROL = int(gguf.TokenType.CONTROL)
USER_DEFINED = int(gguf.TokenType.USER_DEFINED)

# --- chat templates, abridged from the real ones (what matters is their literals) -------

CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
LLAMA3 = (
    "{{- bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] "
    "+ '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{% endif %}"
)
GEMMA = (
    "{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + message['role'] + '\\n' "
    "+ message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}"
)
QWEN3_HYBRID = (
    "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content "
    "+ '<|im_end|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}{%- if enable_thinking is defined and enable_thinking is "
    "false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}"
)
QWEN3_THINKING = (
    "{%- for message in messages %}{%- if message.role == 'assistant' and '</think>' in "
    "message.content %}{%- set content = message.content.split('</think>')[-1] %}{%- endif %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}"
    "{%- endif %}"
)
HARMONY = (
    "{%- for message in messages %}{{- '<|start|>' + message.role + '<|message|>' + "
    "message.content + '<|end|>' }}{%- endfor %}{%- if add_generation_prompt %}"
    "{{- '<|start|>assistant' }}{%- endif %}{# <|channel|>analysis / final #}"
)
MISTRAL = (
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
    "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% else %}{{ message['content'] + "
    "eos_token }}{% endif %}{% endfor %}"
)
LFM2 = (
    "{{- bos_token -}}{%- for message in messages -%}{{- '<|im_start|>' + message['role'] + "
    "'\\n' -}}{%- if tools -%}{{- '<|tool_list_start|>' + tools | tojson + '<|tool_list_end|>' "
    "-}}{%- endif -%}{{- message['content'] + '<|im_end|>\\n' -}}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)
DEEPSEEK_R1 = (
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
    "{{ '<｜User｜>' + message['content'] }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<｜Assistant｜><think>\\n' }}{% endif %}"
)
PHI3 = (
    "{% for message in messages %}{{ '<|' + message['role'] + '|>\\n' + message['content'] + "
    "'<|end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}"
    "{% endif %}<|user|>"
)

# Special tokens a template family's vocabulary carries: (text, token type).
TokenSpec = str | tuple[str, int]
CHATML_TOKENS: tuple[TokenSpec, ...] = ("<|im_start|>", "<|im_end|>")
QWEN3_TOKENS: tuple[TokenSpec, ...] = (
    "<|im_start|>", "<|im_end|>",
    ("<think>", USER_DEFINED), ("</think>", USER_DEFINED),
    ("<tool_call>", USER_DEFINED), ("</tool_call>", USER_DEFINED),
)  # fmt: skip
HARMONY_TOKENS: tuple[TokenSpec, ...] = (
    "<|start|>",
    "<|end|>",
    "<|message|>",
    "<|channel|>",
    "<|return|>",
    "<|call|>",
    "<|constrain|>",
)
LLAMA3_TOKENS: tuple[TokenSpec, ...] = (
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
    "<|python_tag|>",
    "<|eom_id|>",
)
GEMMA_TOKENS: tuple[TokenSpec, ...] = ("<start_of_turn>", "<end_of_turn>")
MISTRAL_TOKENS: tuple[TokenSpec, ...] = ("[INST]", "[/INST]", "[TOOL_CALLS]", "[THINK]", "[/THINK]")
LFM2_TOKENS: tuple[TokenSpec, ...] = (
    "<|im_start|>", "<|im_end|>", "<|tool_call_start|>", "<|tool_call_end|>",
    "<|tool_list_start|>", "<|tool_list_end|>", ("<think>", USER_DEFINED), ("</think>", USER_DEFINED),
)  # fmt: skip

_WORDS = ("▁the", "▁a", "▁is", "▁Hello", "▁hello", "▁world", "▁you", "▁I", "▁it", "▁of")


def _spm_vocab(specials: Sequence[TokenSpec]) -> tuple[list[str], list[float], list[int]]:
    """A SentencePiece-style vocabulary llama.cpp accepts: unk/bos/eos, bytes, chars, words."""
    tokens = ["<unk>", "<s>", "</s>"]
    types = [int(gguf.TokenType.UNKNOWN), CONTROL, CONTROL]
    tokens += [f"<0x{b:02X}>" for b in range(256)]  # byte fallback for any other text
    types += [int(gguf.TokenType.BYTE)] * 256
    for spec in specials:
        text, ttype = (spec, CONTROL) if isinstance(spec, str) else spec
        tokens.append(text)
        types.append(ttype)
    normal = ["▁", *(chr(c) for c in range(33, 127)), *_WORDS]
    tokens += normal
    types += [int(gguf.TokenType.NORMAL)] * len(normal)
    scores = [0.0] * (len(tokens) - len(normal)) + [-float(i) for i in range(len(normal))]
    return tokens, scores, types


def _llama_tensors(n_vocab: int, n_embd: int, n_head: int, n_head_kv: int, n_ff: int, n_layer: int,
                   seed: int) -> dict[str, np.ndarray[Any, Any]]:  # fmt: skip
    rng = np.random.default_rng(seed)

    def w(*shape: int) -> np.ndarray[Any, Any]:
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    ones = np.ones(n_embd, dtype=np.float32)
    n_embd_kv = n_embd // n_head * n_head_kv
    # numpy shapes are (rows, cols); the writer stores them reversed, in ggml order.
    out = {"token_embd.weight": w(n_vocab, n_embd), "output_norm.weight": ones, "output.weight": w(n_vocab, n_embd)}
    for i in range(n_layer):
        out |= {
            f"blk.{i}.attn_norm.weight": ones,
            f"blk.{i}.attn_q.weight": w(n_embd, n_embd),
            f"blk.{i}.attn_k.weight": w(n_embd_kv, n_embd),
            f"blk.{i}.attn_v.weight": w(n_embd_kv, n_embd),
            f"blk.{i}.attn_output.weight": w(n_embd, n_embd),
            f"blk.{i}.ffn_norm.weight": ones,
            f"blk.{i}.ffn_gate.weight": w(n_ff, n_embd),
            f"blk.{i}.ffn_up.weight": w(n_ff, n_embd),
            f"blk.{i}.ffn_down.weight": w(n_embd, n_ff),
        }
    return out


def write_tiny_llama(
    path: Path,
    template: str | None = CHATML,
    tokens: Sequence[TokenSpec] = CHATML_TOKENS,
    n_ctx_train: int = 2048,
    *,
    name: str | None = "Tiny Llama (test)",
    eos: str | None = None,
    n_layer: int = 2,
    n_embd: int = 64,
    n_head: int = 4,
    n_head_kv: int = 2,
    n_ff: int = 128,
    seed: int = 0,
    extra: Mapping[str, Any] | None = None,
    split_max_tensors: int = 0,
    architecture: str = "llama",
) -> Path:
    """Write a tiny llama model llama.cpp can load; returns `path` (the first shard if split).

    `tokens` are extra special tokens (CONTROL unless given as `(text, type)`); `eos` names
    one of them as EOS (default `</s>`). `extra` adds metadata (str/int/float/bool values).
    `split_max_tensors` > 0 writes shards `stem-0000N-of-0000M.gguf` next to `path`.
    `architecture` names another one with the same tensors (llama.cpp loads only some).
    """
    vocab, scores, types = _spm_vocab(tokens)
    w = gguf.GGUFWriter(path, architecture, split_max_tensors=split_max_tensors)
    w.add_type("model")
    if name:
        w.add_name(name)
    w.add_context_length(n_ctx_train)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_rope_dimension_count(n_embd // n_head)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(int(gguf.LlamaFileType.ALL_F32))
    w.add_tokenizer_model("llama")
    w.add_token_list(vocab)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(vocab.index(eos) if eos else 2)
    if template:
        w.add_chat_template(template)
    _add_extra(w, extra or {})
    for tname, data in _llama_tensors(len(vocab), n_embd, n_head, n_head_kv, n_ff, n_layer, seed).items():
        w.add_tensor(tname, data)
    _finish(w)
    if split_max_tensors:
        first = path.with_name(f"{path.stem}-00001-of-{len(w.tensors):05d}.gguf")
        return first if first.exists() else path
    return path


def _add_extra(w: gguf.GGUFWriter, extra: Mapping[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, bool):
            w.add_bool(key, value)
        elif isinstance(value, int):
            w.add_uint32(key, value)
        elif isinstance(value, float):
            w.add_float32(key, value)
        elif isinstance(value, str):
            w.add_string(key, value)
        else:
            w.add_array(key, list(value))


def _finish(w: gguf.GGUFWriter) -> None:
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_projector(path: Path) -> Path:
    """A tiny vision projector (`clip` architecture, general.type mmproj)."""
    w = gguf.GGUFWriter(path, "clip")
    w.add_type("mmproj")
    w.add_name("Test projector")
    w.add_tensor("mm.0.weight", np.zeros((4, 32), dtype=np.float32))
    _finish(w)
    return path


def write_big_vocab_model(
    path: Path, n_vocab: int = 150_000, n_layer: int = 32, n_embd: int = 4096, n_ff: int = 11008
) -> Path:
    """A multi-GB Q4_K model header with an `n_vocab` BPE vocabulary and as many merges.

    The tensor data is a sparse hole (os.truncate), so the file claims its full size on
    disk without using it: a realistic subject for header-read timing.
    """
    tokens = [f"tok{i}" for i in range(n_vocab - 4)] + ["<|im_start|>", "<|im_end|>", "<think>", "</think>"]
    w = gguf.GGUFWriter(path, "qwen2")
    w.add_name("Big vocab (benchmark)")
    w.add_context_length(32768)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_head_count(32)
    w.add_head_count_kv(8)
    w.add_file_type(int(gguf.LlamaFileType.MOSTLY_Q4_K_M))
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    w.add_token_types([1] * (n_vocab - 4) + [CONTROL, CONTROL, USER_DEFINED, USER_DEFINED])
    w.add_token_merges([f"t{i} k{i}" for i in range(n_vocab)])
    w.add_chat_template(QWEN3_THINKING)
    q4k = gguf.GGMLQuantizationType.Q4_K
    block, size = gguf.GGML_QUANT_SIZES[q4k]

    def info(name: str, rows: int, cols: int) -> None:
        w.add_tensor_info(name, (rows, cols), np.dtype(np.float32), rows * cols // block * size, raw_dtype=q4k)

    info("token_embd.weight", n_vocab, n_embd)
    for i in range(n_layer):
        for part, rows, cols in (("attn_q", n_embd, n_embd), ("attn_k", 1024, n_embd), ("attn_v", 1024, n_embd),
                                 ("attn_output", n_embd, n_embd), ("ffn_gate", n_ff, n_embd),
                                 ("ffn_up", n_ff, n_embd), ("ffn_down", n_embd, n_ff)):  # fmt: skip
            info(f"blk.{i}.{part}.weight", rows, cols)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    assert w.fout is not None
    header_end = w.fout[0].tell()
    total = sum(w.ggml_pad(ti.nbytes, 32) for ti in w.tensors[0].values())
    w.close()
    os.truncate(path, w.ggml_pad(header_end, 32) + total)
    return path


# --- raw bytes, for headers no writer would produce --------------------------------------

GGUF_STRING = 8
GGUF_ARRAY = 9
GGUF_UINT32 = 4


def raw_str(text: str | bytes, declared: int | None = None) -> bytes:
    """A GGUF string; `declared` overrides the length field (to lie about it)."""
    data = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(data) if declared is None else declared) + data


def raw_kv_str(key: str, value: str, declared: int | None = None) -> bytes:
    return raw_str(key) + struct.pack("<I", GGUF_STRING) + raw_str(value, declared)


def raw_kv_u32(key: str, value: int) -> bytes:
    return raw_str(key) + struct.pack("<II", GGUF_UINT32, value)


def raw_kv_array(key: str, item_type: int, count: int, payload: bytes = b"") -> bytes:
    return raw_str(key) + struct.pack("<IIQ", GGUF_ARRAY, item_type, count) + payload


def raw_tensor_info(name: str, shape: Sequence[int], ggml_type: int, offset: int) -> bytes:
    dims = b"".join(struct.pack("<Q", d) for d in shape)
    return raw_str(name) + struct.pack("<I", len(shape)) + dims + struct.pack("<IQ", ggml_type, offset)


def raw_gguf(
    kvs: Sequence[bytes] = (),
    tensors: Sequence[bytes] = (),
    *,
    version: int = 3,
    n_kv: int | None = None,
    n_tensors: int | None = None,
    magic: bytes = b"GGUF",
    data: bytes = b"",
) -> bytes:
    """A whole GGUF file; counts default to the real ones, data is padded to 32."""
    head = magic + struct.pack(
        "<IQQ", version, len(tensors) if n_tensors is None else n_tensors, len(kvs) if n_kv is None else n_kv
    )
    body = head + b"".join(kvs) + b"".join(tensors)
    if data:
        body += b"\0" * (-len(body) % 32) + data
    return body


def write_raw(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    return path
