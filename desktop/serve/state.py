"""What the server reads from the engine on every request: the model's name and its defaults.

Read per request, because the window can switch models while it serves.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from desktop.serve.wire import Defaults
from engine.runtime import Engine
from engine.session.settings import TurnSettings


def model_id_for(engine: Engine) -> Callable[[], str]:
    """The served model's id: the file name without `.gguf` (what `/v1/models` lists)."""

    def model_id() -> str:
        backend = engine.backend
        if backend is None:
            return "none"
        name = backend.name
        return Path(name).stem if name.lower().endswith(".gguf") else name

    return model_id


def defaults_for(engine: Engine, settings: Callable[[], TurnSettings] | TurnSettings) -> Callable[[], Defaults]:
    """A request's defaults: the model's settings (sampling, reply limit) and its context size."""

    def defaults() -> Defaults:
        turn = settings() if callable(settings) else settings
        backend = engine.backend
        context = backend.capabilities.n_ctx if backend is not None else 0
        max_tokens = min(turn.max_tokens, context) if context else turn.max_tokens
        return Defaults(turn.sampling, max_tokens, context)

    return defaults
