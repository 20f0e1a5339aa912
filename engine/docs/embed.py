"""Embeddings through llama.cpp itself, from a GGUF embedding model (nomic-embed, bge, e5…).

    embedder = LlamaEmbedder.load(path)          # its own Llama in embedding mode, mean pooling
    vectors = embedder.embed(["passage one", …])  # float32 rows of unit length

Any GGUF llama.cpp can load will do; a decoder model (the built-in SmolLM2) gives usable
vectors with mean pooling, which is what the tests use. Passages longer than the batch are
truncated to it (a passage is about 300 tokens). The embedder owns its own `Llama`, never the
chat model's, and is used from one thread (the indexer's worker, or the caller's for a query).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from engine.errors import ModelLoadError

if TYPE_CHECKING:
    from engine.docs.vectors import Vector  # numpy: imported where vectors are made, not at start-up
EMBED_CTX = 2048  # tokens per llama.cpp batch: several passages are embedded per decode


class Embedder(Protocol):
    name: str

    def embed(self, texts: Sequence[str]) -> Vector:
        """One unit-length float32 row per text."""
        ...


class LlamaEmbedder:
    def __init__(self, llama: object, name: str) -> None:
        self.llama = llama
        self.name = name

    @classmethod
    def load(cls, path: Path, *, n_threads: int | None = None) -> LlamaEmbedder:
        import llama_cpp

        from engine.backends import llama_log
        from engine.backends.cpu_check import ensure_cpu_runs
        from engine.backends.cpu_threads import default_threads
        from engine.backends.llama_plain import new_llama

        if not path.is_file():
            raise ModelLoadError(f"embedding model not found: {path}")
        llama_log.install()  # llama.cpp's lines go to logging, not straight to the terminal
        ensure_cpu_runs()  # the CPU variant that runs here, loaded (or a one-line refusal)
        # Embedding is all batch work: n_threads_batch is the one that counts (llama-cpp-python's
        # default is every logical CPU, which stalls on a busy machine; the chat model's is used).
        threads = n_threads or default_threads()
        try:
            llama = new_llama(
                model_path=str(path), embedding=True, pooling_type=llama_cpp.LLAMA_POOLING_TYPE_MEAN,
                n_ctx=EMBED_CTX, n_batch=EMBED_CTX, n_ubatch=EMBED_CTX, n_threads=threads,
                n_threads_batch=threads, verbose=False,
            )
        except (ValueError, RuntimeError, OSError) as exc:
            raise ModelLoadError(f"cannot load the embedding model {path.name}: {exc}") from exc
        return cls(llama, str(path))

    def embed(self, texts: Sequence[str]) -> Vector:
        import llama_cpp

        from engine.docs.vectors import stack

        assert isinstance(self.llama, llama_cpp.Llama)
        rows = self.llama.embed(list(texts), normalize=True, truncate=True) if texts else []
        return stack(rows, self.llama.n_embd())

    def close(self) -> None:
        close = getattr(self.llama, "close", None)
        if callable(close):
            close()
