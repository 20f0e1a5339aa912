"""One settings resolver for both front ends: saved per-model settings + overrides → a turn's settings.

The GUI passes the loaded model's saved settings (its dialog edits them); `ember chat` the
same saved settings plus its flags. One set of defaults: `models.library.settings.ModelSettings`'s,
which `engine.backends.base.Sampling` also takes. Qt-free; not in `models/`, as it builds `Sampling`.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path

from engine.backends.base import Message, Sampling
from engine.errors import ConfigError
from models.errors import EmberError
from models.library.default_model import default_model_path
from models.library.recommended import recommended_values
from models.library.settings import ModelSettings, load_model_settings

log = logging.getLogger("desktop.settings")


@dataclass(frozen=True, slots=True)
class Overrides:
    """Values given for this run (command-line flags); None keeps the saved value."""

    temperature: float | None = None
    seed: int | None = None
    max_tokens: int | None = None
    context_length: int | None = None
    gpu_layers: int | None = None
    threads: int | None = None
    system_prompt: str | None = None
    kv_cache: str | None = None


@dataclass(frozen=True, slots=True)
class TurnSettings:
    """What a model loads with and what each turn sends."""

    model: ModelSettings  # the effective settings: saved ones with the overrides applied
    sampling: Sampling
    max_tokens: int

    @property
    def system_prompt(self) -> str:
        return self.model.system_prompt

    def messages(self, messages: list[Message]) -> list[Message]:
        """`messages` led by the model's system prompt, unless the conversation has its own."""
        if not self.system_prompt.strip() or (messages and messages[0].get("role") == "system"):
            return messages
        return [{"role": "system", "content": self.system_prompt}, *messages]


def resolve(saved: ModelSettings | None = None, overrides: Overrides | None = None) -> TurnSettings:
    """The settings of a run; ConfigError (one line) for an override out of range."""
    given = {k: v for k, v in dataclasses.asdict(overrides or Overrides()).items() if v is not None}
    try:
        s = dataclasses.replace(saved or ModelSettings(), **given)
    except ValueError as exc:
        raise ConfigError(str(exc).replace("invalid model setting ", "invalid value for ")) from exc
    sampling = Sampling(temperature=s.temperature, top_p=s.top_p, top_k=s.top_k, min_p=s.min_p,
                        repeat_penalty=s.repeat_penalty, seed=s.seed)
    # No limit means "until the model stops or the context is full": the backend stops at
    # the context edge, so the context length is a limit that never cuts a reply short.
    return TurnSettings(s, sampling, s.max_tokens or s.context_length)


def saved_settings(path: Path, n_ctx_train: int | None = None) -> ModelSettings:
    """The file's saved settings, capped at its training context.

    What was never saved comes from the model's own recommended sampling (and, for the
    built-in model, a repetition penalty and a reply cap: `models.library.recommended`).
    """
    defaults = model_defaults(path)
    try:
        return load_model_settings(path, n_ctx_train=n_ctx_train, defaults=defaults)
    except (OSError, ValueError) as exc:
        log.warning("could not read the settings of %s: %s", path.name, exc)
        return defaults


def model_defaults(path: Path) -> ModelSettings:
    """The defaults for `path` before anything is saved for it."""
    try:
        return dataclasses.replace(ModelSettings(), **recommended_values(path, builtin=is_builtin(path)))  # pyright: ignore[reportArgumentType]
    except ValueError as exc:  # a recommendation out of range: the plain defaults
        log.warning("ignoring the recommended sampling of %s: %s", path.name, exc)
        return ModelSettings()


def is_builtin(path: Path) -> bool:
    try:
        return path.resolve() == default_model_path().resolve()
    except (EmberError, OSError):
        return False
