"""Models: which file a name means, what it is, the settings it opens with, and opening it.

The window (`desktop.core.model_choice`), `ember chat`/`serve`/`bench` (`desktop.cli.common`)
and the settings dialog all come here, so a model behaves the same whichever front end
opens it. Its defaults follow what the model is (`models.library.recommended`), never the
path of its file; what the user saved for it wins over them. What a file is (its header and
metadata, what its name says, why it will not load, its projector, its memory need and sizes
in words, its origin and digest), its settings' bounds and saving them, and removing one are named here too.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from engine.api.factory import BackendSpec, make_backend, parse_backend_spec
from engine.backends.base import Backend
from engine.errors import ModelLoadError
from engine.llama.load_errors import precheck_model_file
from engine.rewrite.optimize_file import offer_text, optimize
from models.formats import MarkerKind
from models.gguf.builtin_templates import BASE_MODEL_NOTE
from models.gguf.diagnose import explain_load_failure, metadata_problem
from models.gguf.header import read_header
from models.gguf.meta import ModelMetadata, format_parameters, metadata_from_header, read_metadata
from models.gguf.names import is_first_part, is_projector_name, model_key, quant_in_name, shard_of
from models.gguf.projector import ProjectorInfo
from models.library.default_model import DEFAULT_NAME, DefaultModelMissing, default_model_path
from models.library.digests import file_sha256
from models.library.memory import KV_CACHE_TYPES, MemoryEstimate, estimate_memory, format_bytes
from models.library.origins import Origin, origins
from models.library.paths import resolve_model_file
from models.library.projectors import pair
from models.library.recommended import recommended_values
from models.library.removal import owned_by_ember, remove_model
from models.library.settings import (
    AUTO_GPU_LAYERS,
    DEFAULT_CONTEXT_LENGTH,
    MAX_SEED,
    MIN_CONTEXT_LENGTH,
    ModelSettings,
    load_model_settings,
    load_options,
    save_model_settings,
    useful_tps,
)

if TYPE_CHECKING:  # llama.cpp loads with it: only where a model is opened
    from engine.llama.llama import LlamaBackend

__all__ = [
    "AUTO_GPU_LAYERS",
    "BASE_MODEL_NOTE",
    "DEFAULT_CONTEXT_LENGTH",
    "DEFAULT_NAME",
    "KV_CACHE_TYPES",
    "MAX_SEED",
    "MIN_CONTEXT_LENGTH",
    "BackendSpec",
    "DefaultModelMissing",
    "MarkerKind",
    "MemoryEstimate",
    "ModelMetadata",
    "ModelSettings",
    "Origin",
    "ProjectorInfo",
    "default_model_path",
    "estimate_memory",
    "explain_load_failure",
    "file_sha256",
    "format_bytes",
    "format_parameters",
    "is_first_part",
    "is_projector_name",
    "load_model_settings",
    "metadata_from_header",
    "metadata_problem",
    "model_defaults",
    "model_file",
    "model_key",
    "model_settings",
    "offer_text",
    "open_llama",
    "open_model",
    "optimize",
    "origins",
    "owned_by_ember",
    "pair",
    "parse_backend_spec",
    "precheck_model_file",
    "quant_in_name",
    "read_header",
    "read_metadata",
    "remove_model",
    "resolve_model_file",
    "save_model_settings",
    "shard_of",
    "template_problem",
    "useful_tps",
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


def open_llama(path: Path, *, n_ctx: int, n_gpu_layers: int, kv_cache: str) -> LlamaBackend:
    """Load `path` in llama.cpp with exactly these options (`ember history reproduce`: as recorded)."""
    from engine.llama.llama import LlamaBackend  # llama.cpp: imported only here

    return LlamaBackend(path, n_ctx=n_ctx, n_gpu_layers=n_gpu_layers, kv_cache=kv_cache)


def template_problem(source: str | None, *, bos_token: str = "", eos_token: str = "") -> str | None:
    """None when a chat template renders a probe conversation; else why not, in one line."""
    from engine.llama import template_probe  # brings jinja2: only when a template is checked

    return template_probe.template_problem(source, bos_token=bos_token, eos_token=eos_token)
