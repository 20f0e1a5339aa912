"""Turning a `--backend` spec into a Backend: `llama` (default), `script:FILE`, `openai:URL`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.backends.base import Backend
from engine.errors import ConfigError
from models.library.settings import AUTO_GPU_LAYERS, DEFAULT_CONTEXT_LENGTH


@dataclass(frozen=True, slots=True)
class BackendSpec:
    kind: str  # llama | script | openai
    target: str = ""  # script path or base URL


def parse_backend_spec(spec: str | None) -> BackendSpec:
    """Parse `llama`, `script:FILE` or `openai:URL`; a bad spec is a ConfigError."""
    if spec is None or spec == "llama":
        return BackendSpec("llama")
    kind, sep, target = spec.partition(":")
    if not sep or not target:
        raise ConfigError(f"bad --backend {spec!r}: use llama, script:FILE or openai:URL")
    if kind not in ("script", "openai"):
        raise ConfigError(f"unknown backend {kind!r}: use llama, script:FILE or openai:URL")
    return BackendSpec(kind, target)


def make_backend(
    spec: BackendSpec,
    *,
    model_path: Path | None = None,
    model_name: str | None = None,
    api_key: str | None = None,
    n_ctx: int = DEFAULT_CONTEXT_LENGTH,
    n_gpu_layers: int = AUTO_GPU_LAYERS,
    n_threads: int | None = None,
    kv_cache: str = "f16",
    prompt_lookup: bool = True,
    draft_model: Path | None = None,
    projector: Path | None = None,
    gpu_device: str = "",
) -> Backend:
    """Build the backend; llama models load here (may raise ModelLoadError)."""
    if spec.kind == "script":
        from engine.backends.scripted import ScriptedBackend

        return ScriptedBackend.from_file(spec.target)
    if spec.kind == "openai":
        from engine.backends.openai import OpenAIBackend

        return OpenAIBackend(spec.target, model=model_name or "", api_key=api_key)
    from engine.llama.llama import LlamaBackend
    from models.library.default_model import default_model_path

    path = model_path if model_path is not None else default_model_path()
    backend = LlamaBackend(
        path,
        n_ctx=n_ctx,
        n_gpu_layers=n_gpu_layers,
        n_threads=n_threads,
        kv_cache=kv_cache,
        draft_model=draft_model,
        projector=projector,
        gpu_device=gpu_device,
    )
    backend.prompt_lookup = prompt_lookup
    return backend
