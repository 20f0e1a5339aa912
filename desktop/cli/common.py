"""What every `ember` subcommand shares: exit codes, the one-line failure, opening a backend.

Parsed arguments are read, never rewritten: the settings a run uses come back from
`run_settings` as a value (`engine.session.settings`), the same way the GUI gets them.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.api.text import strict_dumps

if TYPE_CHECKING:  # the helpers below import what they use: `ember --version` imports this module too
    from engine.api.session import TurnSettings
    from engine.api.values import Backend

EXIT_OK = 0
EXIT_FAILED = 1  # the command ran and failed (e.g. a history write)
EXIT_USAGE = 2  # bad arguments, a file that cannot be used, nothing was done
EXIT_TURN_ERROR = 3  # the model's turn ended with an error
EXIT_INTERRUPTED = 130  # Ctrl+C
EXIT_BROKEN_PIPE = 141  # the reader of stdout went away (as SIGPIPE would report it)


def fail(message: str, status: int = EXIT_USAGE) -> int:
    """Report a failure as one line on stderr; returns `status` for the caller to exit with."""
    sys.stderr.write(f"ember: {message}\n")
    return status


def warn(message: str) -> None:
    """A one-line notice on stderr that does not end the command (e.g. an MCP server left out)."""
    sys.stderr.write(f"ember: {message}\n")


def note_base_model(backend: Backend) -> None:
    """Say once, at the start, that the loaded file has no chat template (a base model, likely)."""
    from engine.api.models import BASE_MODEL_NOTE

    if backend.capabilities.base_model:
        warn(BASE_MODEL_NOTE)


def emit_json(obj: dict[str, Any]) -> None:
    """One JSON object per line on stdout (`--events`), flushed so a reader sees it at once."""
    from engine.api.text import json_text  # a path that is not UTF-8 is written escaped, as valid UTF-8

    sys.stdout.write(strict_dumps(json_text(obj), ensure_ascii=False) + "\n")
    sys.stdout.flush()


def positive_int(text: str) -> int:
    """An argparse type: a whole number above zero."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return value


def model_path(args: argparse.Namespace) -> Path:
    """The GGUF file `--model` names (`default`: the built-in one); ModelLoadError if it is missing."""
    from engine.api.models import model_file

    return model_file(args.model)


def run_settings(args: argparse.Namespace) -> TurnSettings:
    """The model's saved settings (as the GUI keeps them) with the command-line flags over them."""
    from engine.api.errors import GGUFError, ModelLoadError
    from engine.api.models import ModelSettings, model_settings, parse_backend_spec, resolve_model_file
    from engine.api.session import Overrides, resolve

    saved = ModelSettings()
    if parse_backend_spec(args.backend).kind == "llama":
        try:
            saved = model_settings(resolve_model_file(model_path(args)))
        except (ModelLoadError, GGUFError):
            pass  # the load reports the missing model or the link loop
    overrides = Overrides(
        temperature=args.temperature,
        seed=args.seed,
        max_tokens=args.max_tokens,
        context_length=args.ctx,
        gpu_layers=args.gpu_layers,
        threads=args.threads,
        system_prompt=args.system,
        kv_cache=getattr(args, "kv_cache", None),
    )
    return resolve(saved, overrides)


def open_backend(args: argparse.Namespace, settings: TurnSettings) -> Backend:
    """The backend the arguments ask for, loaded with `settings`; raises EngineError (one line)."""
    from engine.api.errors import ConfigError
    from engine.api.models import open_model, parse_backend_spec

    spec = parse_backend_spec(args.backend)
    if spec.kind == "openai":
        key = os.environ.get(args.api_key_env) if args.api_key_env else None
        if args.api_key_env and key is None:
            raise ConfigError(f"the environment variable {args.api_key_env} is not set")
        name = None if args.model == "default" else args.model
        return open_model(spec, model_name=name, api_key=key)
    path = model_path(args) if spec.kind == "llama" else None
    return open_model(spec, path=path, settings=settings.model)
