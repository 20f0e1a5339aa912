"""Why a model file will not load, in one line, from its header alone.

llama.cpp's own reason for refusing a file goes to its log, and the exception says only
"Failed to load model from file". A backend calls `explain_load_failure(path)` after such
a failure (or before loading) to get a reason a person can act on.
"""

from __future__ import annotations

from pathlib import Path

from models.errors import GGUFError
from models.gguf.architectures import LLAMA_CPP_VERSION, SUPPORTED_ARCHITECTURES
from models.gguf.meta import ModelMetadata, read_metadata
from models.gguf.projector import projector_note


def unknown_architecture(meta: ModelMetadata) -> bool:
    """A model (not a projector) whose architecture this llama.cpp does not know."""
    return not meta.is_projector and meta.architecture not in SUPPORTED_ARCHITECTURES


def metadata_problem(meta: ModelMetadata) -> str | None:
    """Why a file that parsed cleanly still is not a chat model llama.cpp can run."""
    if meta.is_projector:
        return projector_note(meta.path)
    if unknown_architecture(meta):
        return (
            f"unsupported architecture {meta.architecture!r} "
            f"(llama.cpp in llama-cpp-python {LLAMA_CPP_VERSION} does not know it)"
        )
    if meta.missing_shards:
        numbers = ", ".join(str(n) for n in meta.missing_shards)
        return f"missing shard {numbers} of {meta.shard_count} (all shards must sit side by side)"
    if meta.tensor_count == 0:
        return "the file holds no weights (a vocabulary-only GGUF?)"
    if not meta.vocab_size:
        return "the file has no vocabulary (tokenizer.ggml.tokens is missing)"
    return None


def explain_load_failure(path: Path | str) -> str | None:
    """The one-line reason `path` cannot be loaded, or None if its header looks fine.

    Covers: missing, a directory, unreadable, empty, not GGUF (wrong magic), unsupported
    GGUF version, malformed or truncated header, tensor data past the end of the file,
    a projector instead of a model, and an architecture this llama.cpp does not know.
    None means the cause lies elsewhere (memory, a bad tensor, a llama.cpp bug).
    """
    try:
        meta = read_metadata(Path(path))
    except GGUFError as exc:
        return exc.reason
    return metadata_problem(meta)
