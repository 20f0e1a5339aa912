"""Embeddings through llama.cpp itself, from a GGUF embedding model.

    embedder = LlamaEmbedder.load(path)          # its own Llama in embedding mode
    vectors = embedder.embed(["passage one", …])  # float32 rows of unit length

Ember's default is all-MiniLM-L6-v2 (`DEFAULT_EMBEDDER`, converted once from its wheel by
`models.library.default_embedder`): a 22M-parameter model trained for retrieval, about 40×
faster per passage here than the chat model (×40.4 on the same passages, docs/performance.md).
A user's own embedding model (nomic-embed, bge, e5…) works the same way, with the pooling its
GGUF names. A chat model loads too (mean pooling over a decoder), but `chat_model_warning` says
what it costs: slow, and vectors that know nothing about questions.

An encoder (BERT) reads at most its trained context at once, so a passage is cut to it; a
decoder's passages are cut to the 2,048-token batch. `embed` holds a lock: the window's indexer
and a search may share one loaded embedder (`shared_embedder`), which stays loaded for the
process (the window, `ember serve`) rather than loading again per search.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from engine.errors import ModelLoadError

if TYPE_CHECKING:
    from engine.docs.vectors import Vector  # numpy: imported where vectors are made, not at start-up
EMBED_CTX = 2048  # tokens per llama.cpp batch: several passages are embedded per decode
DEFAULT_EMBEDDER = "default"  # a collection's embedder: all-MiniLM-L6-v2, wherever the data folder is
GROUP = 2  # passages per llama.cpp call (an encoder packs at most 512 tokens anyway): cancel seen between


class Embedder(Protocol):
    name: str

    def embed(self, texts: Sequence[str]) -> Vector:
        """One unit-length float32 row per text."""
        ...


@dataclass(frozen=True, slots=True)
class EmbedderKind:
    """What a GGUF's header says about it as an embedder."""

    encoder: bool  # non-causal or with a pooling type: made for embeddings
    context: int  # its trained context, in tokens
    architecture: str


def embedder_kind(path: Path) -> EmbedderKind:
    """Read from the GGUF's header (no model loaded); `ModelLoadError` when it is not a GGUF."""
    from models.errors import EmberError
    from models.gguf.header import read_header

    try:
        kv = read_header(path, keep_tokens=False).kv
    except EmberError as exc:
        raise ModelLoadError(f"cannot read the embedding model {path.name}: {exc}") from exc
    arch = str(kv.get("general.architecture", ""))
    encoder = f"{arch}.pooling_type" in kv or kv.get(f"{arch}.attention.causal") is False
    context = kv.get(f"{arch}.context_length", EMBED_CTX)
    return EmbedderKind(encoder, int(context) if isinstance(context, int) else EMBED_CTX, arch)


def chat_model_warning(path: Path) -> str | None:
    """A line for a GGUF that is a chat model rather than an embedding model, else None."""
    kind = embedder_kind(path)
    if kind.encoder:
        return None
    return (
        f"{path.name} is a chat model ({kind.architecture or 'unknown architecture'}), not an embedding model: "
        f"embedding will be slow (minutes for what the default embedder does in seconds) and search poor; "
        f"leave --embedder out for the default, or use an embedding GGUF (nomic-embed, bge, e5)"
    )


def resolve_embedder(spec: str) -> Path:
    """A collection's stored embedder (`DEFAULT_EMBEDDER` or a path) as a GGUF path (converting on first use)."""
    if spec != DEFAULT_EMBEDDER:
        return Path(spec)
    import engine.backends.llama_first  # noqa: F401  # pyright: ignore[reportUnusedImport]  (llama.cpp before numpy)
    from models.library.default_embedder import DefaultEmbedderMissing, default_embedder_path

    try:
        return default_embedder_path()
    except DefaultEmbedderMissing as exc:
        raise ModelLoadError(str(exc)) from exc


class LlamaEmbedder:
    def __init__(self, llama: object, name: str, max_tokens: int = EMBED_CTX) -> None:
        self.llama = llama
        self.name = name
        self.max_tokens = max_tokens  # tokens of one text llama.cpp embeds (the rest is cut)
        self._lock = threading.Lock()

    @classmethod
    def load(cls, path: Path, *, n_threads: int | None = None) -> LlamaEmbedder:
        import llama_cpp

        from engine.backends import llama_log
        from engine.backends.cpu_check import ensure_cpu_runs
        from engine.backends.cpu_threads import default_threads
        from engine.backends.llama_plain import new_llama

        if not path.is_file():
            raise ModelLoadError(f"embedding model not found: {path}")
        kind = embedder_kind(path)
        llama_log.install()  # llama.cpp's lines go to logging, not straight to the terminal
        ensure_cpu_runs()  # the CPU variant that runs here, loaded (or a one-line refusal)
        # Embedding is all batch work: n_threads_batch is the one that counts (llama-cpp-python's
        # default is every logical CPU, which stalls on a busy machine; the chat model's is used).
        threads = n_threads or default_threads()
        # An encoder sees a whole text in one micro-batch and knows positions up to its context.
        batch = min(EMBED_CTX, kind.context) if kind.encoder else EMBED_CTX
        pooling = llama_cpp.LLAMA_POOLING_TYPE_UNSPECIFIED if kind.encoder else llama_cpp.LLAMA_POOLING_TYPE_MEAN
        try:
            llama = new_llama(
                model_path=str(path),
                embedding=True,
                pooling_type=pooling,
                n_ctx=batch,
                n_batch=batch,
                n_ubatch=batch,
                n_threads=threads,
                n_threads_batch=threads,
                verbose=False,
            )
        except (ValueError, RuntimeError, OSError) as exc:
            raise ModelLoadError(f"cannot load the embedding model {path.name}: {exc}") from exc
        return cls(llama, str(path), batch)

    def embed(self, texts: Sequence[str]) -> Vector:
        import llama_cpp

        from engine.docs.vectors import stack

        assert isinstance(self.llama, llama_cpp.Llama)
        with self._lock:
            rows = self.llama.embed(list(texts), normalize=True, truncate=True) if texts else []
            return stack(rows, self.llama.n_embd())

    def close(self) -> None:
        close = getattr(self.llama, "close", None)
        if callable(close):
            close()


class EmbedCancelled(Exception):
    """The cancel check said stop between two groups of passages."""


def embed_in_groups(embedder: Embedder, texts: Sequence[str], cancel: Callable[[], bool]) -> Vector:
    """`embedder.embed(texts)` a few passages at a time, looking at `cancel` between groups."""
    from engine.docs.vectors import concat

    parts: list[Vector] = []
    for start in range(0, len(texts), GROUP):
        if cancel():
            raise EmbedCancelled
        parts.append(embedder.embed(texts[start : start + GROUP]))
    return concat(parts)


_shared: dict[str, LlamaEmbedder] = {}
_shared_lock = threading.Lock()


def shared_embedder(spec: str) -> LlamaEmbedder:
    """The embedder a collection names, loaded once per process and kept (the window, `ember serve`)."""
    with _shared_lock:
        embedder = _shared.get(spec)
        if embedder is None:
            if not _shared:  # a model still held when the interpreter tears llama.cpp down segfaults
                atexit.register(close_shared)
            embedder = _shared[spec] = LlamaEmbedder.load(resolve_embedder(spec))
        return embedder


def close_shared() -> None:
    """Close every kept embedder (at exit)."""
    with _shared_lock:
        for embedder in _shared.values():
            embedder.close()
        _shared.clear()
