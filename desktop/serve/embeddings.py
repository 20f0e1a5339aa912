"""`POST /v1/embeddings`: the request checked into an `EmbedCall`, run on the embedder, answered in OpenAI's shape.

The embedder (`ember serve --embedder GGUF`) owns its own llama.cpp model, and takes its turn
in the same first-come-first-served line as chat requests: it never runs beside a chat
reply nor beside itself. Its work runs on a thread in batches of at most one llama.cpp batch
of tokens; a client that disconnects stops it at the next batch, and the line is handed on
only when that thread has really finished.

Bounds: at most `MAX_INPUTS` texts (OpenAI's own limit), none empty, none longer than the
model reads at once (a 400 naming the input, rather than a vector of a silently cut text).
Token arrays (what some clients send after tokenizing with OpenAI's tokenizer) mean nothing
to another model's vocabulary: they are refused with a 400 that says to send text.
"""

from __future__ import annotations

import array
import base64
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

from desktop.serve.errors import ApiError, bad_request
from engine.api.values import CancelToken

MAX_INPUTS = 2048


class TextEmbedder(Protocol):
    """What the server needs of an embedding model."""

    name: str
    dimensions: int
    max_tokens: int  # the longest input it reads whole

    def count_tokens(self, text: str) -> int: ...

    def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        """One unit-length row per text."""
        ...

    def close(self) -> None: ...


class LlamaTextEmbedder:
    """`engine.docs.embed.LlamaEmbedder` (llama.cpp, mean pooling) with its tokenizer's counts."""

    def __init__(self, inner: Any, path: Path | None = None) -> None:
        self._inner = inner
        self.name: str = inner.name
        self.path = path  # the GGUF file (`/api/tags` reads its size, digest and details)
        llama = inner.llama
        self._tokenize: Callable[[bytes], list[int]] = llama.tokenize
        self.dimensions: int = llama.n_embd()
        self.max_tokens: int = llama.n_batch  # llama.cpp embeds a text in one batch

    @classmethod
    def load(cls, path: Path, *, n_threads: int | None = None) -> LlamaTextEmbedder:
        from engine.api.documents import LlamaEmbedder  # loads llama.cpp (and numpy): only when asked for

        return cls(LlamaEmbedder.load(path, n_threads=n_threads), path)

    def count_tokens(self, text: str) -> int:
        return len(self._tokenize(text.encode("utf-8")))  # as `Llama.embed` tokenizes: with BOS

    def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        return cast(Sequence[Sequence[float]], self._inner.embed(texts).tolist())

    def close(self) -> None:
        self._inner.close()


@dataclass(frozen=True, slots=True)
class EmbedCall:
    model: str
    texts: tuple[str, ...]
    base64: bool
    dimensions: int | None


def parse_embeddings(body: dict[str, Any]) -> EmbedCall:
    """Check the fields an embeddings request may carry; raises ApiError (400) naming the bad one."""
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise bad_request("'model' must be a string", "model")
    encoding = body.get("encoding_format", "float")
    if encoding not in ("float", "base64"):
        raise bad_request("'encoding_format' must be float or base64", "encoding_format")
    dimensions = body.get("dimensions")
    if dimensions is not None and (isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1):
        raise bad_request("'dimensions' must be a whole number of at least 1", "dimensions")
    return EmbedCall(model or "", _texts(body.get("input")), encoding == "base64", dimensions)


def _texts(value: Any) -> tuple[str, ...]:
    items = cast(list[Any], value) if isinstance(value, list) else [value]
    if isinstance(value, list) and not items:
        raise bad_request("'input' must not be empty", "input")
    if len(items) > MAX_INPUTS:
        raise bad_request(f"'input' has {len(items)} texts; at most {MAX_INPUTS} per request", "input")
    for i, item in enumerate(items):
        where = f"input[{i}]" if isinstance(value, list) else "input"
        if isinstance(item, (int, list)) and not isinstance(item, bool):
            raise bad_request(
                "token arrays are not supported (tokens of another model's vocabulary mean "
                "nothing here): send the text",
                where,
            )
        if not isinstance(item, str):
            raise bad_request("'input' must be a string or an array of strings", where)
        if not item:
            raise bad_request(f"'{where}' is an empty string", where)
    return tuple(cast(list[str], items))


def batches(counts: Sequence[int], limit: int) -> list[range]:
    """Consecutive runs of inputs whose tokens fit in one llama.cpp batch of `limit` tokens."""
    runs: list[range] = []
    start, total = 0, 0
    for i, n in enumerate(counts):
        if i > start and total + n > limit:
            runs.append(range(start, i))
            start, total = i, 0
        total += n
    if start < len(counts):
        runs.append(range(start, len(counts)))
    return runs


def embed_all(embedder: TextEmbedder, texts: Sequence[str], cancel: CancelToken) -> tuple[list[Sequence[float]], int]:
    """Every text's vector and the tokens read (runs on a worker thread, holding the model)."""
    counts = [embedder.count_tokens(t) for t in texts]
    for i, n in enumerate(counts):
        if n > embedder.max_tokens:
            where = f"input[{i}]" if len(texts) > 1 else "input"
            raise ApiError(
                400,
                f"'{where}' is {n} tokens; the embedding model reads at most {embedder.max_tokens} at once",
                param=where,
                code="context_length_exceeded",
            )
    rows: list[Sequence[float]] = []
    for run in batches(counts, embedder.max_tokens):
        cancel.check()  # the client went away: stopped between batches
        rows.extend(embedder.embed([texts[i] for i in run]))
    return rows, sum(counts)


def check_dimensions(call: EmbedCall, embedder: TextEmbedder) -> None:
    """`dimensions` can only ask for the model's own size (shortening vectors needs a model trained for it)."""
    if call.dimensions is not None and call.dimensions != embedder.dimensions:
        raise bad_request(
            f"this embedding model gives {embedder.dimensions} dimensions, not {call.dimensions}", "dimensions"
        )


def response(call: EmbedCall, model_id: str, rows: Sequence[Sequence[float]], tokens: int) -> dict[str, Any]:
    data = [
        {"object": "embedding", "index": i, "embedding": _base64(row) if call.base64 else list(row)}
        for i, row in enumerate(rows)
    ]
    return {
        "object": "list",
        "data": data,
        "model": model_id,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def _base64(row: Sequence[float]) -> str:
    """Little-endian float32s in base64, as OpenAI sends them (its client decodes with numpy)."""
    packed = array.array("f", row)
    if sys.byteorder != "little":
        packed.byteswap()
    return base64.b64encode(packed.tobytes()).decode("ascii")


def model_id(embedder: TextEmbedder) -> str:
    name = Path(embedder.name).name
    return name[: -len(".gguf")] if name.lower().endswith(".gguf") else name
