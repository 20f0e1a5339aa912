"""Models: which file a name means, the settings it opens with, and opening it: one place.

The window (`desktop.core.model_choice`), `ember chat`/`serve`/`bench` (`desktop.cli.common`)
and the settings dialog all come here, so a model behaves the same whichever front end
opens it. Its defaults follow what the model is (`models.library.recommended`), never the
path of its file; what the user saved for it wins over them.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from engine.backends.base import Backend
from engine.backends.factory import BackendSpec, make_backend, parse_backend_spec
from engine.backends.load_errors import precheck_model_file
from engine.errors import ModelLoadError
from models.library.default_model import DefaultModelMissing, default_model_path
from models.library.recommended import recommended_values
from models.library.settings import ModelSettings, load_model_settings, load_options

__all__ = [
    "BackendSpec",
    "model_defaults",
    "model_file",
    "model_settings",
    "open_model",
    "parse_backend_spec",
    "precheck_model_file",
]

log = logging.getLogger(__name__)


def model_file(name: str | Path | None) -> Path:
    """The GGUF file `name` means (None or `default`: the built-in one); ModelLoadError if that is missing."""
    if name is not None and str(name) != "default":
        return Path(name).expanduser()
    try:
        return default_model_path()
    except DefaultModelMissing as exc:  # a FileNotFoundError: give it the load-error shape
        raise ModelLoadError(str(exc)) from exc


def model_defaults(path: Path) -> ModelSettings:
    """The settings `path` opens with before anything is saved for it: what the model is asks for."""
    try:
        return dataclasses.replace(ModelSettings(), **recommended_values(path))  # pyright: ignore[reportArgumentType]
    except ValueError as exc:  # a recommendation out of range: the plain defaults
        log.warning("ignoring the recommended sampling of %s: %s", path.name, exc)
        return ModelSettings()


def model_settings(path: Path, n_ctx_train: int | None = None) -> ModelSettings:
    """The file's saved settings over its defaults, capped at its training context."""
    defaults = model_defaults(path)
    try:
        return load_model_settings(path, n_ctx_train=n_ctx_train, defaults=defaults)
    except (OSError, ValueError) as exc:
        log.warning("could not read the settings of %s: %s", path.name, exc)
        return defaults


def open_model(
    spec: BackendSpec,
    *,
    path: Path | None = None,
    settings: ModelSettings | None = None,
    model_name: str | None = None,
    api_key: str | None = None,
) -> Backend:
    """Build and load the backend; a local file loads with `settings` (may raise ModelLoadError)."""
    if spec.kind == "openai":
        return make_backend(spec, model_name=model_name, api_key=api_key)
    options = load_options(settings) if spec.kind == "llama" and settings is not None else {}
    try:
        return make_backend(spec, model_path=path, **options)
    except DefaultModelMissing as exc:  # the built-in is gone: the load-error shape
        raise ModelLoadError(str(exc)) from exc
