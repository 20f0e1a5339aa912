"""Which model the window opens, how a turn uses its settings, how it is described. No Qt here.

A `ModelChoice` is everything needed to (re)load a model: the backend spec, the file or
remote model name, and for local files the saved per-model settings (context, GPU layers
and threads apply when it loads; sampling, length and system prompt to every turn). The
last used model lives in the model library (`models.library`), next to the recent files.
API keys are never held here: a remote backend reads its key from `models.remote_keys`
on the worker thread, so no choice, label or log line can carry one.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from engine.backend import Backend, Message, Sampling
from engine.errors import ModelLoadError
from engine.factory import BackendSpec, make_backend, parse_backend_spec
from models.default_model import DEFAULT_NAME, DefaultModelMissing, default_model_path
from models.library import (
    RemoteServer,
    last_used_entry,
    load_library_state,
    note_opened,
    note_server_used,
    save_library_state,
)
from models.remote_keys import load_api_key
from models.settings import ModelSettings, load_model_settings

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

    def factory(self) -> Backend:
        """Build the backend; runs on the engine's worker thread."""
        try:
            return self._build()
        except DefaultModelMissing as exc:  # a FileNotFoundError: give it the load-error shape
            raise ModelLoadError(str(exc)) from exc

    def _build(self) -> Backend:
        if self.spec.kind == "openai":
            key = load_api_key(self.spec.target)  # read here, never stored on the choice
            return make_backend(self.spec, model_name=self.model_name, api_key=key)
        if self.spec.kind != "llama" or self.settings is None:
            return make_backend(self.spec, model_path=self.path)
        s = self.settings
        return make_backend(self.spec, model_path=self.path, n_ctx=s.context_length,
                            n_gpu_layers=s.gpu_layers, n_threads=s.threads)

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
        return path.resolve()
    except OSError:
        return path.absolute()


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What the header and status bar say about the loaded backend."""

    label: str
    device: str  # CPU | GPU | Scripted | Remote
    device_note: str = ""


# --- building choices ---------------------------------------------------------------------


def saved_settings(path: Path, n_ctx_train: int | None = None) -> ModelSettings:
    """The file's saved settings (defaults when none or unreadable), capped at its training context."""
    try:
        return load_model_settings(path, n_ctx_train=n_ctx_train)
    except (OSError, ValueError) as exc:
        log.warning("could not read the settings of %s: %s", path.name, exc)
        return ModelSettings()


def local_choice(path: Path | None, label: str | None = None, *, n_ctx_train: int | None = None,
                 notice: str | None = None) -> ModelChoice:
    """A llama choice for `path` (None = the built-in model) with its saved settings."""
    spec = BackendSpec("llama")
    if path is None:
        choice = ModelChoice(spec, label=label or DEFAULT_NAME, notice=notice)
    else:
        choice = ModelChoice(spec, path, label or path.name, notice=notice)
    file = choice.model_file
    settings = saved_settings(file, n_ctx_train) if file is not None else ModelSettings()
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
    name = label or getattr(backend, "name", "") or "Model"
    kind = type(backend).__name__
    if kind == "ScriptedBackend":
        return ModelInfo(name, "Scripted")
    if kind == "OpenAIBackend":
        return ModelInfo(name, "Remote")
    gpu_layers = int(getattr(backend, "n_gpu_layers", 0) or 0)
    note = str(getattr(backend, "gpu_note", "") or "")
    where = str(getattr(backend, "where", "") or "")  # `GPU · 30/30 layers · NVIDIA H200`
    return ModelInfo(name, where or ("GPU" if gpu_layers > 0 else "CPU"), note)


# --- what a turn uses ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TurnOptions:
    """Sampling, reply length and system prompt for one turn with the loaded model."""

    sampling: Sampling
    max_tokens: int
    system_prompt: str = ""

    def messages(self, messages: list[Message]) -> list[Message]:
        """`messages` led by the model's system prompt, unless the conversation has its own."""
        if not self.system_prompt.strip() or (messages and messages[0].get("role") == "system"):
            return messages
        return [{"role": "system", "content": self.system_prompt}, *messages]


def turn_options(choice: ModelChoice | None, sampling: Sampling, max_tokens: int) -> TurnOptions:
    """The loaded model's saved settings for a turn; the given defaults when it has none."""
    s = choice.settings if choice is not None else None
    if s is None:
        return TurnOptions(sampling, max_tokens)
    own = Sampling(temperature=s.temperature, top_p=s.top_p, top_k=s.top_k, min_p=s.min_p,
                   repeat_penalty=s.repeat_penalty, seed=s.seed)
    # No limit means "until the model stops or the context is full": the backend stops at
    # the context edge, so the context length is a limit that never cuts a reply short.
    return TurnOptions(own, s.max_tokens or s.context_length, s.system_prompt)
