"""Per-model settings, kept in `model_settings.json` in the config directory.

The file maps each model's absolute path to its settings:

    {"version": 1, "models": {"/abs/model.gguf": {"context_length": 8192, ...}}}

Reading is forgiving: unknown keys are ignored, a value of the wrong type or out of range
falls back to its default (logged), and a corrupt file is backed up and replaced
(models/library/jsonstore.py). Writing is atomic.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard, cast

from models.errors import GGUFError
from models.library.json_schema import Schema, describe, holds, is_int, is_object
from models.library.jsonstore import load_json_object, string_keys, write_json_atomic
from models.library.memory import KV_CACHE_TYPES
from models.library.paths import EmberPaths, ember_paths, resolve_model_file
from models.library.speed import USEFUL_TPS

log = logging.getLogger(__name__)

SETTINGS_FILENAME = "model_settings.json"
FORMAT_VERSION = 1
DEFAULT_CONTEXT_LENGTH = 4096  # the runtime context (n_ctx) a model loads with unless its settings say otherwise
AUTO_GPU_LAYERS = -1  # the setting "as many layers as fit on the GPU" (engine/llama/offload.py decides); 0 = CPU
MIN_CONTEXT_LENGTH = 128
MAX_SEED = 2**32 - 1
# What a conversation sends once it outgrows the context (engine/turns/context_policy.py).
CONTEXT_POLICIES = ("truncate-middle", "rolling", "stop")


def _is_int(v: object) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def _int_in(lo: int, hi: int | None = None) -> Callable[[object], bool]:
    return lambda v: _is_int(v) and lo <= v and (hi is None or v <= hi)


def _optional(check: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda v: v is None or check(v)


def _float_in(lo: float, hi: float) -> Callable[[object], bool]:
    def check(v: object) -> bool:
        if not isinstance(v, int | float) or isinstance(v, bool):
            return False
        return math.isfinite(v) and lo <= v <= hi

    return check


def _text(v: object) -> bool:
    return isinstance(v, str) and len(v) <= 200_000


# One check per field: used both to reject bad arguments and to skip bad stored values.
_CHECKS: Mapping[str, Callable[[object], bool]] = {
    "context_length": _int_in(MIN_CONTEXT_LENGTH, 1 << 24),
    "gpu_layers": _int_in(AUTO_GPU_LAYERS),
    "threads": _optional(_int_in(1, 4096)),
    "temperature": _float_in(0.0, 5.0),
    "top_p": _float_in(0.0, 1.0),
    "top_k": _int_in(0),  # 0 = off
    "min_p": _float_in(0.0, 1.0),
    "repeat_penalty": _float_in(0.0, 5.0),
    "seed": _optional(_int_in(0, MAX_SEED)),
    "system_prompt": _text,
    "max_tokens": _optional(_int_in(1)),
    "context_policy": lambda v: isinstance(v, str) and v in CONTEXT_POLICIES,
    "kv_cache": lambda v: isinstance(v, str) and v in KV_CACHE_TYPES,
    "prompt_lookup": lambda v: isinstance(v, bool),
    "draft_model": _optional(lambda v: isinstance(v, str) and 0 < len(v) <= 4096),
    "projector": _optional(lambda v: isinstance(v, str) and 0 < len(v) <= 4096),
    "gpu_device": lambda v: isinstance(v, str) and len(v) <= 200,
}


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """How to load and sample one model. Invalid values raise ValueError."""

    context_length: int = DEFAULT_CONTEXT_LENGTH
    gpu_layers: int = AUTO_GPU_LAYERS  # as many layers as fit on the GPU (all, usually); 0 = CPU only
    threads: int | None = None  # None = the backend picks
    temperature: float = 0.7
    top_p: float = 0.95
    top_k: int = 40
    min_p: float = 0.05
    repeat_penalty: float = 1.0  # 1.0 = off (it hurts code and structured output)
    seed: int | None = None  # None = a fresh random seed for every reply
    system_prompt: str = ""
    max_tokens: int | None = None  # None = until the model stops or the context is full
    context_policy: str = CONTEXT_POLICIES[0]  # the default for this model's conversations
    kv_cache: str = "f16"  # the KV cache's type: f16, q8_0 or q4_0 (smaller, slightly less exact)
    prompt_lookup: bool = True  # speculative decoding by prompt lookup (same output, faster on repeats)
    draft_model: str | None = None  # a GGUF with the same vocabulary that drafts tokens ahead
    projector: str | None = None  # a vision projector (mmproj) chosen; None: a fitting one beside the model
    gpu_device: str = ""  # "" = the best real GPU; a device's name or index (a software one too); "cpu"

    @property
    def reply_limit(self) -> int:
        """A reply's token limit: `max_tokens`, or with no limit the context length (the
        backend stops at the context's edge, so that never cuts a reply short)."""
        return self.max_tokens or self.context_length

    def __post_init__(self) -> None:
        for name, check in _CHECKS.items():
            value = getattr(self, name)
            if not holds(check, value):
                raise ValueError(f"invalid model setting {name}={value!r}")

    def capped(self, n_ctx_train: int | None) -> ModelSettings:
        """These settings with the context no longer than the model was trained for."""
        if n_ctx_train is None or n_ctx_train < MIN_CONTEXT_LENGTH:
            return self
        if self.context_length <= n_ctx_train:
            return self
        return dataclasses.replace(self, context_length=n_ctx_train)

    def to_json(self) -> dict[str, object]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, object], base: ModelSettings | None = None) -> ModelSettings:
        """Settings from stored JSON: unknown keys ignored, bad values replaced by `base`'s (the defaults)."""
        good: dict[str, object] = {}
        for name, check in _CHECKS.items():
            if name not in data:
                continue
            value = data[name]
            if _is_int(value) and name in _FLOAT_FIELDS:
                value = float(value)
            if holds(check, value):
                good[name] = value
            else:
                log.warning("ignoring model setting %s=%s (invalid); using the default", name, describe(value))
        return (
            dataclasses.replace(base, **cast(dict[str, Any], good))
            if base is not None
            else cls(**cast(dict[str, Any], good))
        )


_FLOAT_FIELDS = frozenset({"temperature", "top_p", "min_p", "repeat_penalty"})


def settings_file(paths: EmberPaths | None = None) -> Path:
    return (paths or ember_paths()).config_dir / SETTINGS_FILENAME


def model_key(model: Path) -> str:
    """The key a model's settings are stored under: its absolute, resolved path."""
    try:
        return str(resolve_model_file(model))
    except (OSError, GGUFError):  # a symlink loop, an unreachable share
        return str(model.expanduser().absolute())


def _defaults() -> dict[str, object]:
    return {"version": FORMAT_VERSION, "models": {}}


_SCHEMA: Schema = {"version": is_int, "models": is_object}


def _stored_models(paths: EmberPaths | None) -> dict[str, object]:
    data = load_json_object(settings_file(paths), _defaults(), _SCHEMA)
    models = data.get("models")
    if not isinstance(models, dict):
        return {}
    return string_keys(cast(dict[object, object], models))


def useful_tps(paths: EmberPaths | None = None) -> float:
    """The decode speed (tokens/s) suggestions must reach to lead (`useful_tokens_per_s` in settings.json)."""
    value = load_json_object(settings_file(paths), _defaults(), _SCHEMA).get("useful_tokens_per_s")
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value <= 1000:
        return float(value)
    return USEFUL_TPS


def load_model_settings(
    model: Path,
    *,
    n_ctx_train: int | None = None,
    paths: EmberPaths | None = None,
    defaults: ModelSettings | None = None,
) -> ModelSettings:
    """Saved settings for `model` (`defaults` if none, or for what was not saved), capped at its training context."""
    stored = _stored_models(paths).get(model_key(model))
    if isinstance(stored, dict):
        settings = ModelSettings.from_json(string_keys(cast(dict[object, object], stored)), defaults)
    else:
        settings = defaults or ModelSettings()
    return settings.capped(n_ctx_train)


def save_model_settings(model: Path, settings: ModelSettings, *, paths: EmberPaths | None = None) -> None:
    """Store `settings` for `model`, keeping every other model's settings."""
    models = _stored_models(paths)
    models[model_key(model)] = settings.to_json()
    write_json_atomic(settings_file(paths), {"version": FORMAT_VERSION, "models": models})


def load_options(s: ModelSettings) -> dict[str, Any]:
    """The settings a local model is loaded with, as `make_backend`'s keyword arguments."""
    return {
        "n_ctx": s.context_length,
        "n_gpu_layers": s.gpu_layers,
        "n_threads": s.threads,
        "kv_cache": s.kv_cache,
        "prompt_lookup": s.prompt_lookup,
        "draft_model": Path(s.draft_model).expanduser() if s.draft_model else None,
        "projector": Path(s.projector).expanduser() if s.projector else None,
        "gpu_device": s.gpu_device,
    }
