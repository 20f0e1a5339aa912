"""Which model the window opens, how a turn uses its settings, how it is described. No Qt here.

A `ModelChoice` is everything needed to (re)load a model: the backend spec, the file or
remote model name, and for local files the saved per-model settings (context, GPU layers
and threads apply when it loads; `engine.session.settings` turns them into each
turn's sampling, length and system prompt). The
last used model lives in the model library (`models.library.scan`), next to the recent files.
API keys are never held here: a remote backend reads its key from `models.library.remote_keys`
on the worker thread, so no choice, label or log line can carry one.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from engine.api.errors import GGUFError
from engine.api.library import (
    RemoteServer,
    last_used_entry,
    load_api_key,
    load_library_state,
    note_opened,
    note_server_used,
    save_library_state,
)
from engine.api.models import (
    BASE_MODEL_NOTE,
    DEFAULT_NAME,
    BackendSpec,
    DefaultModelMissing,
    ModelSettings,
    default_model_path,
    model_settings,
    open_model,
    parse_backend_spec,
    resolve_model_file,
)
from engine.api.text import label as label_text  # the window's rendering of the one rule
from engine.api.values import Backend

log = logging.getLogger("desktop.models")


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """A model to load: a backend spec plus, for llama, the file (None = the default model).

    `settings` is None for scripted and remote backends (the controller's defaults apply).
    `notice` is something to tell the user once it is loaded (e.g. a missing last model).
    """

    spec: BackendSpec
    path: Path | None = None
    label: str = DEFAULT_NAME
    settings: ModelSettings | None = None
    model_name: str | None = None  # the remote model id (openai backend)
    notice: str | None = None

    def __post_init__(self) -> None:
        # The label comes from a model file or a server: shown in labels, so no controls or bidi overrides.
        object.__setattr__(self, "label", label_text(self.label))

    def factory(self) -> Backend:
        """Build the backend; runs on the engine's loader thread (Engine.load)."""
        key = load_api_key(self.spec.target) if self.spec.kind == "openai" else None  # never stored here
        return open_model(self.spec, path=self.path, settings=self.settings, model_name=self.model_name, api_key=key)

    @property
    def model_file(self) -> Path | None:
        """The GGUF file this choice loads (the built-in one for the default); None if remote."""
        if self.spec.kind != "llama":
            return None
        if self.path is not None:
            return self.path
        try:
            return default_model_path()
        except DefaultModelMissing:
            return None

    def with_settings(self, settings: ModelSettings) -> ModelChoice:
        return dataclasses.replace(self, settings=settings)


def same_model(a: ModelChoice | None, b: ModelChoice | None) -> bool:
    """True when both choices load the same model (settings aside)."""
    if a is None or b is None:
        return False
    if a.spec.kind != b.spec.kind:
        return False
    if a.spec.kind == "openai":
        return (a.spec.target.rstrip("/"), a.model_name) == (b.spec.target.rstrip("/"), b.model_name)
    if a.spec.kind == "llama":
        fa, fb = a.model_file, b.model_file
        return fa is not None and fb is not None and _resolved(fa) == _resolved(fb)
    return a.spec == b.spec


def _resolved(path: Path) -> Path:
    try:
        return resolve_model_file(path)
    except (OSError, GGUFError):  # a symlink loop, an unreachable share
        return path.absolute()


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What the header and status bar say about the loaded backend."""

    label: str
    device: str  # CPU | GPU | Scripted | Remote
    device_note: str = ""
    note: str = ""  # one line the window shows once the model is loaded (a base model's)
    sees: bool = True  # takes pictures (a vision projector, a remote server); the chips warn when not


# --- building choices ---------------------------------------------------------------------


def local_choice(
    path: Path | None, label: str | None = None, *, n_ctx_train: int | None = None, notice: str | None = None
) -> ModelChoice:
    """A llama choice for `path` (None = the built-in model) with its saved settings."""
    spec = BackendSpec("llama")
    if path is None:
        choice = ModelChoice(spec, label=label or DEFAULT_NAME, notice=notice)
    else:
        choice = ModelChoice(spec, path, label or path.name, notice=notice)
    file = choice.model_file
    settings = model_settings(file, n_ctx_train) if file is not None else ModelSettings()
    return choice.with_settings(settings)


def remote_label(model: str | None, base_url: str) -> str:
    host = urlsplit(base_url).netloc or base_url
    return f"{model or 'Remote model'} at {host}"


def remote_choice(server: RemoteServer) -> ModelChoice:
    """A choice for a saved OpenAI-compatible server (no network until it is loaded)."""
    spec = BackendSpec("openai", server.base_url)
    return ModelChoice(spec, label=remote_label(server.model, server.base_url), model_name=server.model)


def choose_model(model_arg: str | None, backend_arg: str | None) -> ModelChoice:
    """The launch choice: `--backend`/`--model` when given, else the last used, else default.

    A bad backend spec raises `ConfigError` (the CLI reports it before any window opens).
    """
    spec = parse_backend_spec(backend_arg)
    if spec.kind == "script":
        return ModelChoice(spec, label=f"Script: {Path(spec.target).name}")
    if spec.kind == "openai":
        return ModelChoice(spec, label=remote_label(model_arg, spec.target), model_name=model_arg)
    if model_arg and model_arg != "default":
        return local_choice(Path(model_arg).expanduser())
    if model_arg is None:
        return last_used_choice()
    return local_choice(None)


def last_used_choice() -> ModelChoice:
    """The model used last (a file or a saved server, from the library), or the built-in one
    with a notice if it is gone. A server is not contacted until its choice is loaded."""
    state = load_library_state()
    remembered = state.last_used is not None or state.last_used_server is not None
    try:
        last, notice = last_used_entry(state)
    except DefaultModelMissing as exc:  # the built-in is gone too: its load reports why
        return local_choice(None, notice=str(exc) if remembered else None)
    if isinstance(last, RemoteServer):
        return remote_choice(last)
    if state.last_used is not None and notice is None:
        return local_choice(last)
    return local_choice(None, notice=notice)


def remember_model(choice: ModelChoice) -> None:
    """Record a successfully loaded model as the last used, so it comes back at the next start.

    A file, the built-in model (nothing to recall) or a saved server; a server given on the
    command line but never saved, and scripted backends, are not recorded.
    """
    try:
        if choice.spec.kind == "openai":
            if note_server_used(choice.spec.target, choice.model_name) is None:
                log.info("not remembering %s: it is not a saved server", choice.label)
        elif choice.spec.kind != "llama":
            return
        elif choice.path is not None:
            note_opened(choice.path)
        else:
            save_library_state(load_library_state().with_default_used())
    except OSError as exc:
        log.warning("could not remember the last model: %s", exc)


def describe_backend(backend: Backend, label: str | None = None) -> ModelInfo:
    """What the header and status bar say, from what the backend declares."""
    caps = backend.capabilities
    note = BASE_MODEL_NOTE if caps.base_model else ""
    if label is None or label == backend.name:  # named by its file only: the model's own name reads better
        label = own_name(backend) or label
    return ModelInfo(label_text(label or backend.name or "Model"), caps.device, caps.device_note, note, caps.vision)


NAME_MAX_CHARS = 80  # a GGUF's name is the file author's text: a chip's worth of it


def own_name(backend: Backend) -> str:
    """A model file's own name (its GGUF `general.name`) with its quantization, so copies of one
    model still differ: "SmolLM2 135M Instruct (Q4_1)". Empty when the file names none."""
    meta = getattr(backend, "metadata", None)  # a llama backend's GGUF header
    name = str(getattr(meta, "name", "") or "").strip()[:NAME_MAX_CHARS]
    if not name:
        return ""
    quantization = str(getattr(meta, "quantization", "") or "").strip()
    return f"{name} ({quantization})" if quantization and quantization not in name else name
