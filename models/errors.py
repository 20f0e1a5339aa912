"""The root of every error Ember raises, and the errors raised by `models/`.

    EmberError              the base of every Ember error (engine.errors extends the tree)
    ├── GGUFError           a file that is not a usable GGUF model (missing, unreadable, wrong
    │                       magic, bad version, truncated, absurd counts…); `reason` is one line
    └── DefaultModelMissing (models.library.default_model) the built-in model is not installed

Settings and library files never raise on bad content: they fall back to defaults and log.
"""

from __future__ import annotations

import errno
from enum import StrEnum
from pathlib import Path

_MAX_REASON = 300


def one_line(text: str, limit: int = _MAX_REASON) -> str:
    """`text` squeezed onto one line and cut to `limit` characters, for error messages."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class EmberError(Exception):
    """Base of every error Ember raises; the message is one readable line."""


class LoadFailure(StrEnum):
    """What stopped a model file loading, set where the cause is known (the file check, the header
    reader, llama.cpp's log); its value is the sentence a window shows."""

    SHAPES = "This file's tensor shapes don't match its architecture — the file may be damaged or converted wrongly."
    ARCHITECTURE = "This file's model architecture isn't supported by this version of llama.cpp."
    INCOMPLETE = "This file is incomplete — the download may have been cut short."
    NOT_GGUF = "This isn't a GGUF model file."
    MEMORY = "There isn't enough memory to load this model. Try a smaller file or a shorter context."
    MISSING = "The file is no longer where it was."
    DENIED = "Ember isn't allowed to read this file."
    OTHER = "llama.cpp could not load this file."

    @classmethod
    def of(cls, exc: BaseException) -> LoadFailure:
        """The kind of a failed load: the error's own, or an OSError's by its errno."""
        kind = getattr(exc, "kind", None)
        if isinstance(kind, LoadFailure):
            return kind
        if isinstance(exc, OSError) and exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return cls.MISSING
        return cls.DENIED if isinstance(exc, OSError) and exc.errno in (errno.EACCES, errno.EPERM) else cls.OTHER


class GGUFError(EmberError):
    """A GGUF file Ember cannot use. `str(err)` is the one-line reason (no path, no newline)."""

    def __init__(self, reason: str, path: Path | None = None, kind: LoadFailure = LoadFailure.OTHER) -> None:
        self.reason = one_line(reason)
        self.path = path
        self.kind = kind
        super().__init__(self.reason)

    def with_path(self, path: Path) -> GGUFError:
        """The same error, naming `path` (the reader raises before it knows which file)."""
        return GGUFError(self.reason, path, self.kind)
