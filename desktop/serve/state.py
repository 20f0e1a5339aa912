"""What the server reads from the engine on every request: the model's name and the defaults.

Read per request, because the window can switch models while it serves.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from desktop.serve.wire import NEUTRAL_SAMPLING, Defaults
from engine.api.session import Engine, TurnSettings


def model_id_for(engine: Engine) -> Callable[[], str]:
    """The served model's id: the file name without `.gguf` (what `/v1/models` lists)."""

    def model_id() -> str:
        backend = engine.backend
        if backend is None:
            return "none"
        name = backend.name
        return Path(name).stem if name.lower().endswith(".gguf") else name

    return model_id


def defaults_for(
    engine: Engine, settings: Callable[[], TurnSettings] | TurnSettings, *, model_defaults: bool = False
) -> Callable[[], Defaults]:
    """A request's defaults: OpenAI's neutral sampling and the context's room for the reply.

    The request is the prompt: a client that leaves `temperature` out gets 1.0 as on any
    OpenAI-compatible server, not the model's recommended settings (a repeat penalty would
    make `temperature: 0` other than greedy). Those stay one field away
    (`"ember": {"model_defaults": true}`), or the defaults for every request with
    `model_defaults` (`ember serve --model-defaults`). Without a known context size (a
    remote backend) the reply limit is the model's setting.
    """

    def defaults() -> Defaults:
        turn = settings() if callable(settings) else settings
        backend = engine.backend
        context = backend.capabilities.n_ctx if backend is not None else 0
        own = Defaults(turn.sampling, min(turn.max_tokens, context) if context else turn.max_tokens, context)
        if model_defaults:
            return own
        return Defaults(NEUTRAL_SAMPLING, context or turn.max_tokens, context, model=own)

    return defaults
