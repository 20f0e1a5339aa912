"""Which model the window opens, and how it is described on screen. No Qt here.

Until the model library lands, the last model opened with `--model` is remembered in a
small file of its own (`gui_state.json` in the config folder), so nothing else's settings
are rewritten by the window.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.backend import Backend
from engine.errors import ModelLoadError
from engine.factory import BackendSpec, make_backend, parse_backend_spec
from models.default_model import DEFAULT_NAME, DefaultModelMissing
from models.paths import ember_paths

log = logging.getLogger("desktop.models")

STATE_FILE = "gui_state.json"


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """A model to load: a backend spec plus, for llama, the file (None = the default model)."""

    spec: BackendSpec
    path: Path | None = None
    label: str = DEFAULT_NAME

    def factory(self) -> Backend:
        """Build the backend; runs on the engine's worker thread."""
        try:
            return make_backend(self.spec, model_path=self.path, model_name=None)
        except DefaultModelMissing as exc:  # a FileNotFoundError: give it the load-error shape
            raise ModelLoadError(str(exc)) from exc


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What the header and status bar say about the loaded backend."""

    label: str
    device: str  # CPU | GPU | Scripted | Remote
    device_note: str = ""


def choose_model(model_arg: str | None, backend_arg: str | None) -> ModelChoice:
    """The launch choice: `--backend`/`--model` when given, else the last used, else default.

    A bad backend spec raises `ConfigError` (the CLI reports it before any window opens).
    """
    spec = parse_backend_spec(backend_arg)
    if spec.kind == "script":
        return ModelChoice(spec, label=f"Script: {Path(spec.target).name}")
    if spec.kind == "openai":
        return ModelChoice(spec, label=f"{model_arg or 'Remote model'} at {spec.target}")
    if model_arg and model_arg != "default":
        path = Path(model_arg).expanduser()
        return ModelChoice(spec, path, path.name)
    last = last_used_model()
    if last is not None and model_arg is None:
        return ModelChoice(spec, last, last.name)
    return ModelChoice(spec)


def describe_backend(backend: Backend, label: str | None = None) -> ModelInfo:
    name = label or getattr(backend, "name", "") or "Model"
    kind = type(backend).__name__
    if kind == "ScriptedBackend":
        return ModelInfo(name, "Scripted")
    if kind == "OpenAIBackend":
        return ModelInfo(name, "Remote")
    gpu_layers = int(getattr(backend, "n_gpu_layers", 0) or 0)
    note = str(getattr(backend, "gpu_note", "") or "")
    return ModelInfo(name, "GPU" if gpu_layers > 0 else "CPU", note)


def _state_path() -> Path:
    return ember_paths().config_dir / STATE_FILE


def _read_state() -> dict[str, Any]:
    try:
        data = json.loads(_state_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def last_used_model() -> Path | None:
    """The last model file opened in the window, if it still exists."""
    raw = _read_state().get("last_model")
    if not isinstance(raw, str):
        return None
    path = Path(raw)
    return path if path.is_file() else None


def remember_model(choice: ModelChoice) -> None:
    """Record a successfully loaded model file as the last used (default model: forget)."""
    if choice.spec.kind != "llama":
        return
    state = _read_state()
    state["last_model"] = str(choice.path.resolve()) if choice.path else None
    path = _state_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2), encoding="utf-8")
        os.replace(tmp, path)  # atomic: a crash never leaves a half-written file
    except OSError as exc:
        log.warning("could not remember the last model: %s", exc)

