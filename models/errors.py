"""The root of every error Ember raises, and the errors raised by `models/`.

    EmberError              the base of every Ember error (engine.errors extends the tree)
    ├── GGUFError           a file that is not a usable GGUF model (missing, unreadable, wrong
    │                       magic, bad version, truncated, absurd counts…); `reason` is one line
    └── DefaultModelMissing (models.library.default_model) the built-in model is not installed

Settings and library files never raise on bad content: they fall back to defaults and log.
"""

from __future__ import annotations

from pathlib import Path

_MAX_REASON = 300


def one_line(text: str, limit: int = _MAX_REASON) -> str:
    """`text` squeezed onto one line and cut to `limit` characters, for error messages."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class EmberError(Exception):
    """Base of every error Ember raises; the message is one readable line."""


class GGUFError(EmberError):
    """A GGUF file Ember cannot use. `str(err)` is the one-line reason (no path, no newline)."""

    def __init__(self, reason: str, path: Path | None = None) -> None:
        self.reason = one_line(reason)
        self.path = path
        super().__init__(self.reason)

    def with_path(self, path: Path) -> GGUFError:
        """The same error, naming `path` (the reader raises before it knows which file)."""
        return GGUFError(self.reason, path)
