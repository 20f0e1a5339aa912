"""What Ember knows about a GGUF model without loading its weights.

`read_metadata(path)` turns a parsed header (models/gguf/header.py) into a `ModelMetadata`
value: names, size, quantization, the dimensions a memory estimate needs, the chat
template and its family, BOS/EOS, and which thinking/tool-call markers are single tokens.
`ModelProfile` is the part of it the engine consumes.
"""

from __future__ import annotations

import array
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from models.errors import GGUFError
from models.formats import MarkerKind, vocabulary_markers
from models.gguf.architectures import PROJECTOR_ARCHITECTURES
from models.gguf.builtin_templates import builtin_format, candidate_markers, instruction_tuned
from models.gguf.ggml_types import file_type_name, ggml_type_name
from models.gguf.header import GGUFHeader, MetaValue, Skipped, kv_int, kv_str, read_header
from models.gguf.names import shard_name, shard_of
from models.gguf.templates import TemplateFamily, detect_family, thinking_prefill

# tokenizer.ggml.token_type values (llama_token_type / gguf.TokenType); a format constant.
TOKEN_TYPE_NAMES: Mapping[int, str] = {
    1: "NORMAL", 2: "UNKNOWN", 3: "CONTROL", 4: "USER_DEFINED", 5: "UNUSED", 6: "BYTE",
}  # fmt: skip

MAX_LAYERS = 512  # LLAMA_MAX_LAYERS in llama.cpp's llama-hparams.h

# Every marker of the one table of formats, encoded once: the scan compares raw token bytes.
_MARKER_KINDS = vocabulary_markers()
_MARKER_BYTES = frozenset(m.encode() for m in _MARKER_KINDS)


@dataclass(frozen=True, slots=True)
class MarkerToken:
    """A thinking or tool-call marker that is one token in the model's vocabulary."""

    text: str
    token_id: int
    token_type: str  # CONTROL (hidden when detokenized), USER_DEFINED (printed), …
    kind: MarkerKind


@dataclass(frozen=True, slots=True)
class ModelMetadata:
    path: Path
    architecture: str
    name: str
    model_type: str | None  # general.type: "model", "mmproj", "adapter", …
    size_label: str | None  # general.size_label, else derived from `parameters`
    parameters: int  # summed over the tensors of every shard that could be read
    quantization: str  # "Q4_1", "F16", …
    n_ctx_train: int | None  # the context the model was trained on (GGUF `<arch>.context_length`)
    block_count: int | None
    embedding_length: int | None
    head_count: int | None
    head_count_kv: int | None  # the largest per-layer value
    head_count_kv_layers: tuple[int, ...]  # one per layer (0 for non-attention layers)
    key_length: int | None  # per head; None means embedding_length / head_count
    value_length: int | None
    vocab_size: int | None
    tokenizer_model: str | None
    file_size: int  # this file
    size_bytes: int  # every shard present on disk
    shard_count: int
    missing_shards: tuple[int, ...]  # numbers (from 1) of shards absent or unreadable
    tensor_count: int
    gguf_version: int
    chat_template: str | None
    template_family: TemplateFamily
    thinking_prefill: bool
    bos_token: str | None
    eos_token: str | None
    markers: tuple[MarkerToken, ...]
    # A file without a chat template that says it is a chat model: the llama.cpp built-in format
    # it gets (None: a plain transcript; see models.gguf.builtin_templates).
    builtin_template: str | None = None

    @property
    def base_model(self) -> bool:
        """No chat template: most likely a base model, which continues text rather than answering."""
        return self.chat_template is None

    @property
    def is_projector(self) -> bool:
        """A vision/audio projector (mmproj): it accompanies a chat model, is not one."""
        return self.model_type == "mmproj" or self.architecture in PROJECTOR_ARCHITECTURES

    def to_json(self) -> dict[str, object]:
        """Plain JSON values (no template text: it is long; `ember models` prints the family)."""
        return {
            "path": str(self.path),
            "name": self.name,
            "architecture": self.architecture,
            "type": self.model_type,
            "size_label": self.size_label,
            "parameters": self.parameters,
            "quantization": self.quantization,
            "context_length": self.n_ctx_train,
            "block_count": self.block_count,
            "embedding_length": self.embedding_length,
            "head_count": self.head_count,
            "head_count_kv": self.head_count_kv,
            "vocab_size": self.vocab_size,
            "tokenizer": self.tokenizer_model,
            "size_bytes": self.size_bytes,
            "file_size": self.file_size,
            "shard_count": self.shard_count,
            "missing_shards": list(self.missing_shards),
            "template_family": str(self.template_family),
            "thinking_prefill": self.thinking_prefill,
            "has_chat_template": self.chat_template is not None,
            "base_model": self.base_model,
            "builtin_template": self.builtin_template,
            "bos_token": self.bos_token,
            "eos_token": self.eos_token,
            "markers": [
                {"text": m.text, "id": m.token_id, "type": m.token_type, "kind": str(m.kind)} for m in self.markers
            ],
        }


# --- typed access to metadata values ---------------------------------------------------


def _int_layers(kv: Mapping[str, MetaValue], key: str, n_layers: int) -> tuple[int, ...]:
    """A per-layer integer: a scalar repeated `n_layers` times, or an integer array."""
    v = kv.get(key)
    if isinstance(v, array.array) and v.typecode not in "fd":
        return tuple(int(x) for x in v)
    if isinstance(v, int) and not isinstance(v, bool):
        return (v,) * n_layers
    return ()


# --- derived values ---------------------------------------------------------------------


def shard_info(path: Path) -> tuple[str, int, int] | None:
    """(base name, shard number, shard count) for `name-00001-of-00003.gguf`, else None."""
    return shard_of(path.name)


def shard_paths(path: Path) -> list[Path]:
    """Every shard path of the split model `path` belongs to (just `path` if unsplit)."""
    info = shard_info(path)
    if info is None or info[2] < 1:
        return [path]
    base, _, count = info
    return [path.with_name(shard_name(base, i, count)) for i in range(1, count + 1)]


def format_parameters(n: int) -> str:
    """135_000_000 -> "135M", 7_240_000_000 -> "7.2B" (the convention of general.size_label)."""
    if n >= 1_000_000_000:
        return f"{n / 1e9:.1f}".removesuffix(".0") + "B"
    if n >= 1_000_000:
        return f"{n / 1e6:.0f}M"
    if n >= 1_000:
        return f"{n / 1e3:.0f}K"
    return str(n)


def _quantization(header: GGUFHeader) -> str:
    ftype = kv_int(header.kv, "general.file_type")
    if ftype is not None:
        return file_type_name(ftype)
    # Older files lack general.file_type: name the type holding most of the bytes.
    by_bytes: Counter[int] = Counter()
    for t in header.tensors:
        by_bytes[t.ggml_type] += t.n_bytes
    if not by_bytes:
        return "unknown"
    return ggml_type_name(by_bytes.most_common(1)[0][0])


def _token_text(tokens: Sequence[bytes] | None, token_id: int | None) -> str | None:
    if tokens is None or token_id is None or not 0 <= token_id < len(tokens):
        return None
    return tokens[token_id].decode("utf-8", errors="replace")


def _token_type(kv: Mapping[str, MetaValue], token_id: int) -> str:
    types = kv.get("tokenizer.ggml.token_type")
    if isinstance(types, array.array) and 0 <= token_id < len(types):
        code = int(types[token_id])
        return TOKEN_TYPE_NAMES.get(code, f"type {code}")
    return "UNSPECIFIED"


def find_markers(header: GGUFHeader) -> tuple[MarkerToken, ...]:
    """The thinking/tool-call markers that are single tokens, in token-id order."""
    tokens = header.tokens
    if not tokens:
        return ()
    present = _MARKER_BYTES.intersection(tokens)  # a C-speed pass over the vocabulary
    found: list[MarkerToken] = []
    for raw in present:
        token_id = tokens.index(raw)
        text = raw.decode()
        found.append(MarkerToken(text, token_id, _token_type(header.kv, token_id), _MARKER_KINDS[text]))
    return tuple(sorted(found, key=lambda m: m.token_id))


def _tuned(kv: Mapping[str, MetaValue]) -> bool:
    return instruction_tuned(kv_str(kv, f"general.{k}") for k in ("finetune", "name", "basename"))


def _builtin_template(header: GGUFHeader, arch: str) -> str | None:
    """The llama.cpp built-in chat format a template-less file gets (`models.gguf.builtin_templates`)."""
    tokens = header.tokens
    wanted = {m.encode(): m for m in candidate_markers(arch)}
    if not tokens or not wanted:
        return None
    present = frozenset(wanted).intersection(tokens)  # a C-speed pass, as in find_markers
    special = {wanted[raw] for raw in present if _token_type(header.kv, tokens.index(raw)) in _SPECIAL_TYPES}
    fmt = builtin_format(arch, special.__contains__)
    return fmt.name if fmt else None


_SPECIAL_TYPES = frozenset({"CONTROL", "USER_DEFINED"})


def _vocab_size(header: GGUFHeader) -> int | None:
    if header.tokens is not None:
        return len(header.tokens)
    v = header.kv.get("tokenizer.ggml.tokens")
    return v.count if isinstance(v, Skipped) else None


@dataclass(frozen=True, slots=True)
class _Shards:
    parameters: int
    size_bytes: int
    count: int
    missing: tuple[int, ...]


def _shard_totals(path: Path, header: GGUFHeader) -> _Shards:
    """Parameters and bytes on disk over every shard of a split model, and which are missing.

    Other shards are read without their (absent) vocabularies; an unreadable shard counts
    as missing.
    """
    own_params = sum(t.n_elements for t in header.tensors)
    siblings = shard_paths(path)
    if len(siblings) == 1:
        return _Shards(own_params, header.file_size, 1, ())
    params, size = 0, 0
    missing: list[int] = []
    for number, p in enumerate(siblings, start=1):
        if p == path:
            params, size = params + own_params, size + header.file_size
            continue
        try:
            other = read_header(p, keep_tokens=False)
        except GGUFError:
            missing.append(number)
            continue
        params += sum(t.n_elements for t in other.tensors)
        size += other.file_size
    return _Shards(params, size, len(siblings), tuple(missing))


def _display_name(path: Path, kv: Mapping[str, MetaValue]) -> str:
    name = kv_str(kv, "general.name")
    if name and name.strip():
        return name.strip()
    info = shard_info(path)
    return info[0] if info else path.stem


@dataclass(frozen=True, slots=True)
class _Dims:
    block_count: int | None
    embedding_length: int | None
    head_count: int | None
    head_count_kv: int | None
    head_count_kv_layers: tuple[int, ...]
    key_length: int | None
    value_length: int | None


def _block_count(kv: Mapping[str, MetaValue], arch: str) -> int | None:
    n_layer = kv_int(kv, f"{arch}.block_count")
    if n_layer is not None and not 0 <= n_layer <= MAX_LAYERS:
        raise GGUFError(f"{arch}.block_count {n_layer} is out of range (llama.cpp allows 0 to {MAX_LAYERS})")
    return n_layer


def _attention_dims(kv: Mapping[str, MetaValue], arch: str) -> _Dims:
    n_layer = _block_count(kv, arch)
    kv_layers = _int_layers(kv, f"{arch}.attention.head_count_kv", n_layer or 0)
    heads = _int_layers(kv, f"{arch}.attention.head_count", n_layer or 0)
    if not kv_layers:  # llama.cpp: head_count_kv defaults to head_count
        kv_layers = heads
    return _Dims(
        block_count=n_layer,
        embedding_length=kv_int(kv, f"{arch}.embedding_length"),
        head_count=max(heads, default=None),
        head_count_kv=max(kv_layers, default=None),
        head_count_kv_layers=kv_layers,
        key_length=kv_int(kv, f"{arch}.attention.key_length"),
        value_length=kv_int(kv, f"{arch}.attention.value_length"),
    )


def _no_architecture(path: Path) -> str:
    info = shard_info(path)
    if info is not None and info[1] > 1:  # only the first shard carries the metadata
        base, number, count = info
        return f"shard {number} of {count} of a split model; open the first, {base}-00001-of-{count:05d}.gguf"
    return "no general.architecture key (not a model file?)"


def metadata_from_header(path: Path, header: GGUFHeader) -> ModelMetadata:
    kv = header.kv
    arch = kv_str(kv, "general.architecture")
    if not arch:
        raise GGUFError(_no_architecture(path))
    shards = _shard_totals(path, header)
    params = shards.parameters
    size_label = kv_str(kv, "general.size_label") or (format_parameters(params) if params else None)
    template = kv_str(kv, "tokenizer.chat_template")
    template = template if template and template.strip() else None  # an empty template is none
    tokens = header.tokens
    dims = _attention_dims(kv, arch)
    return ModelMetadata(
        path=path,
        architecture=arch,
        name=_display_name(path, kv),
        model_type=kv_str(kv, "general.type"),
        size_label=size_label,
        parameters=params,
        quantization=_quantization(header),
        n_ctx_train=kv_int(kv, f"{arch}.context_length"),
        vocab_size=_vocab_size(header),
        tokenizer_model=kv_str(kv, "tokenizer.ggml.model"),
        file_size=header.file_size,
        size_bytes=shards.size_bytes,
        shard_count=shards.count,
        missing_shards=shards.missing,
        tensor_count=len(header.tensors),
        gguf_version=header.version,
        chat_template=template,
        template_family=detect_family(template),
        thinking_prefill=thinking_prefill(template),
        bos_token=_token_text(tokens, kv_int(kv, "tokenizer.ggml.bos_token_id")),
        eos_token=_token_text(tokens, kv_int(kv, "tokenizer.ggml.eos_token_id")),
        markers=find_markers(header),
        builtin_template=_builtin_template(header, arch) if template is None and _tuned(kv) else None,
        block_count=dims.block_count,
        embedding_length=dims.embedding_length,
        head_count=dims.head_count,
        head_count_kv=dims.head_count_kv,
        head_count_kv_layers=dims.head_count_kv_layers,
        key_length=dims.key_length,
        value_length=dims.value_length,
    )


def read_metadata(path: Path) -> ModelMetadata:
    """Metadata of the GGUF file at `path`, or GGUFError with a one-line reason."""
    header = read_header(path)
    try:
        return metadata_from_header(path, header)
    except GGUFError as exc:
        raise exc.with_path(path) from None
