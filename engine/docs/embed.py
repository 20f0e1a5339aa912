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
import os
import threading
from collections.abc import Generator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from engine.cancel import CancelToken
from engine.errors import ModelLoadError

if TYPE_CHECKING:
    from engine.docs.vectors import Vector  # numpy: imported where vectors are made, not at start-up
EMBED_CTX = 2048  # tokens per llama.cpp batch: several passages are embedded per decode
DEFAULT_EMBEDDER = "default"  # a collection's embedder: all-MiniLM-L6-v2, wherever the data folder is
# all-MiniLM-L6-v2 was trained on 128 word pieces and sentence-transformers cuts its input at 256:
# llama.cpp reads that much of a passage (not its 512 positions), and a micro-batch of 256 tokens
# halves the attention each token costs (an encoder's batch attends across all of it, masked).
DEFAULT_WINDOW = 256
GROUP = 8  # passages per llama.cpp call (packed into batches of the window): cancel seen between
_streaming = 0  # replies streaming in this process: indexing then leaves the chat model its threads
_streaming_lock = threading.Lock()


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
    import engine.llama.llama_first  # noqa: F401  # pyright: ignore[reportUnusedImport]  (llama.cpp before numpy)
    from engine.docs.default_format import cpu_format, default_copy
    from models.library.default_embedder import DefaultEmbedderMissing, default_embedder_path

    try:
        f16 = default_embedder_path()
    except DefaultEmbedderMissing as exc:
        raise ModelLoadError(str(exc)) from exc
    return default_copy(f16, cpu_format())  # the fastest format here (all within cosine 0.99 of f16)


class LlamaEmbedder:
    def __init__(self, llama: object, name: str, max_tokens: int = EMBED_CTX) -> None:
        self.llama = llama
        self.name = name
        self.max_tokens = max_tokens  # tokens of one text llama.cpp embeds (the rest is cut)
        self.fixed_threads: int | None = None  # as asked at load; None: `embedding_threads()` at each call
        self._threads = 0
        self._lock = threading.Lock()

    @classmethod
    def load(
        cls, path: Path, *, n_threads: int | None = None, max_tokens: int | None = None, flash_attn: bool = True
    ) -> LlamaEmbedder:
        import llama_cpp

        from engine.llama import llama_log
        from engine.llama.cpu import ensure_cpu_runs
        from engine.llama.cpu_threads import default_threads
        from engine.llama.llama_plain import new_llama

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
        batch = min(batch, max_tokens or batch)
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
                # llama-cpp-python leaves it off; on: ×1.25 passages/s at 256 tokens (×2 in BF16),
                # the same vectors (cosine to f16 unchanged; docs/performance.md, issue #50's parts).
                # Off only to rebuild the path before issue #50 in the benches.
                flash_attn=flash_attn,
                verbose=False,
            )
        except (ValueError, RuntimeError, OSError) as exc:
            raise ModelLoadError(f"cannot load the embedding model {path.name}: {exc}") from exc
        embedder = cls(llama, str(path), batch)
        embedder.fixed_threads = n_threads
        return embedder

    def embed(self, texts: Sequence[str]) -> Vector:
        import llama_cpp

        from engine.docs.vectors import stack

        assert isinstance(self.llama, llama_cpp.Llama)
        with self._lock:
            self._use_threads(llama_cpp)
            rows = self.llama.embed(list(texts), normalize=True, truncate=True) if texts else []
            return stack(rows, self.llama.n_embd())

    def _use_threads(self, llama_cpp: Any) -> None:
        """The cores that are idle now (all of them on a quiet machine), fewer while a reply streams."""
        threads = self.fixed_threads or embedding_threads()
        if threads != self._threads:
            context: Any = getattr(self.llama, "ctx")  # noqa: B009  (llama-cpp-python's untyped property)
            llama_cpp.llama_set_n_threads(context, threads, threads)
            self._threads = threads

    def close(self) -> None:
        close = getattr(self.llama, "close", None)
        if callable(close):
            close()


def embedding_threads(load: float | None = None, cores: int | None = None) -> int:
    """Threads for the next group of passages: every physical core the machine leaves idle (its load
    average says how many are busy), less the chat model's while a reply streams; at least one.

    llama.cpp's threads meet at a barrier several hundred times a batch, so a thread the OS takes
    away stalls the others: on the shared 2-core machine under a load of 12, two threads embedded
    at a third of one thread's rate (docs/performance.md). On a quiet 8-core laptop it is 8.
    """
    from engine.llama.cpu_threads import default_threads, physical_cores, usable_cpus

    cores = cores or min(physical_cores() or usable_cpus(), usable_cpus())
    if load is None:
        try:
            load = os.getloadavg()[0]
        except OSError:
            load = 0.0
    idle = cores - int(load + 0.5)
    if _streaming:
        idle -= default_threads()
    return max(1, min(cores, idle))


@contextmanager
def reply_streaming() -> Generator[None]:
    """While a reply streams, indexing leaves the chat model its threads (`embedding_threads`)."""
    global _streaming
    with _streaming_lock:
        _streaming += 1
    try:
        yield
    finally:
        with _streaming_lock:
            _streaming -= 1


def embed_in_groups(embedder: Embedder, texts: Sequence[str], cancel: CancelToken) -> Vector:
    """`embedder.embed(texts)` a few passages at a time, looking at `cancel` between groups."""
    from engine.docs.vectors import concat

    parts: list[Vector] = []
    for start in range(0, len(texts), GROUP):
        cancel.check()
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
            window = DEFAULT_WINDOW if spec == DEFAULT_EMBEDDER else None
            embedder = _shared[spec] = LlamaEmbedder.load(resolve_embedder(spec), max_tokens=window)
        return embedder


def close_shared() -> None:
    """Close every kept embedder (at exit)."""
    with _shared_lock:
        for embedder in _shared.values():
            embedder.close()
        _shared.clear()
