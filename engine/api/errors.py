"""The errors a front end catches: `EmberError`, the root of every error Ember raises, and those
a front end tells apart (a bad setting, a model that will not load, a context that is full, a
reply that broke its format, an unreadable GGUF), with `one_line` to show one in a line, and
`LoadFailure`: what kind a failed model load is (a `ModelLoadError`'s `kind`), with its sentence.

Kept apart from `values` so that `ember --version` and the CLI's error guard import only these.
Names only: each lives in `engine.errors` or `models.errors`.
"""

from __future__ import annotations

from engine.errors import Cancelled, ConfigError, ContextOverflowError, EngineError, MalformedReplyError, ModelLoadError
from models.errors import EmberError, GGUFError, LoadFailure, one_line

__all__ = [
    "Cancelled",
    "ConfigError",
    "ContextOverflowError",
    "EmberError",
    "EngineError",
    "GGUFError",
    "LoadFailure",
    "MalformedReplyError",
    "ModelLoadError",
    "one_line",
]
