"""`ember models [--json] [PATH ...]`: list the model library, or describe GGUF files.

    ember models search TEXT             GGUF repositories on the Hub (desktop/cli/models_hub.py)
    ember models pull REPO[:FILE|QUANT]  download one into Ember's models folder (resumable, verified)
    ember models add PATH                put a GGUF file you have into the library
    ember models rm NAME|PATH            delete a model Ember downloaded (desktop/cli/models_manage.py)
    ember models optimize PATH           a faster copy of a slow-format file, beside it (models_optimize.py)
    ember models catalogue               the catalogue, best first here, with predicted speeds (models_catalogue.py)

(A file named like one of those words is described as `./search`.)

Reads headers only (never weights), so it is fast even for multi-GB models. Describing a file
predicts its speed here from this machine's cached profile (`ember models catalogue` measures it). A file that
cannot be used prints one line, `ember: <path>: <reason>`, on stderr and the command exits
with status 2 after describing the others. No Qt here.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from desktop.cli.common import EXIT_OK, EXIT_USAGE, fail, positive_int
from desktop.cli.models_catalogue import file_prediction
from desktop.cli.table import format_table
from desktop.core.get_models import cached_profile
from desktop.core.model_words import template_words
from engine.api.errors import GGUFError
from engine.api.library import LibraryEntry, library_entries
from engine.api.machine import MachineProfile, Prediction
from engine.api.models import (
    BASE_MODEL_NOTE,
    ModelMetadata,
    Origin,
    estimate_memory,
    format_bytes,
    format_parameters,
    load_model_settings,
    metadata_problem,
    origins,
    read_metadata,
    template_problem,
)
from engine.api.text import cell, strict_dumps

NOT_MEASURED = "not known yet (`ember models catalogue` or `ember bench` measures this machine once)"
ACTIONS = ("search", "pull", "add", "rm", "optimize", "catalogue")


def register(sub: Any) -> None:
    p = sub.add_parser("models", help="list, search, pull, add or remove models, or describe GGUF files")
    p.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="GGUF files to describe; or search TEXT, pull REPO[:FILE|QUANT], add PATH, rm NAME|PATH, optimize PATH, "
        "catalogue",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument(
        "--allow", action="store_true", help="search/pull: allow downloads from the Hub's host (asked once otherwise)"
    )
    p.add_argument("--limit", type=positive_int, default=30, metavar="N", help="search: at most N repositories")
    p.add_argument("--quality-tokens", type=positive_int, default=None, help=argparse.SUPPRESS)  # a short test run
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    words: list[str] = args.paths
    if words and words[0] in ACTIONS:
        return _action(words[0], words[1:], args)
    if words:
        return _describe([Path(w) for w in words], as_json=args.json)
    return _list_library(as_json=args.json)


def _action(action: str, rest: list[str], args: argparse.Namespace) -> int:
    if action == "search":
        from desktop.cli.models_hub import search

        return search(" ".join(rest), as_json=args.json, allow=args.allow, limit=args.limit)
    if action == "catalogue":
        from desktop.cli.models_catalogue import catalogue

        return catalogue(as_json=args.json) if not rest else fail("ember models catalogue takes no arguments")
    if len(rest) != 1:
        what = {"pull": "REPO[:FILE|QUANT]", "add": "PATH", "rm": "NAME|PATH", "optimize": "PATH"}[action]
        return fail(f"ember models {action} takes one {what}")
    if action == "pull":
        from desktop.cli.models_hub import pull

        return pull(rest[0], as_json=args.json, allow=args.allow)
    if action == "optimize":
        from desktop.cli.models_optimize import optimize

        return optimize(Path(rest[0]), as_json=args.json, quality_tokens=args.quality_tokens)
    from desktop.cli import models_manage

    if action == "add":
        return models_manage.add(Path(rest[0]), as_json=args.json)
    return models_manage.rm(rest[0], as_json=args.json)


# --- describing files ---------------------------------------------------------------------


def _memory_json(meta: ModelMetadata) -> dict[str, object]:
    settings = load_model_settings(meta.path, n_ctx_train=meta.n_ctx_train)
    n_ctx = settings.context_length
    est = estimate_memory(meta, n_ctx, kv_cache=settings.kv_cache)
    return {
        "context_length": n_ctx,
        "kv_cache": settings.kv_cache,
        "weights_bytes": est.weights_bytes,
        "kv_cache_bytes": est.kv_cache_bytes,
        "total_bytes": est.total_bytes,
        "available_bytes": est.available_bytes,
        "warning": est.warning,
    }


def _describe_json(meta: ModelMetadata, profile: MachineProfile | None) -> dict[str, object]:
    out = meta.to_json()
    out["problem"] = metadata_problem(meta)
    out["template_problem"] = _template_problem(meta)
    out["memory"] = _memory_json(meta)
    prediction = file_prediction(meta, profile)
    out["predicted"] = prediction.to_json() if prediction is not None else None
    return out


def _speed_text(prediction: Prediction) -> str:
    text = f"{prediction.words()} ({prediction.decode_tps:.1f} tokens/s decoding"
    return text + f", {prediction.prompt_tps:.0f} tokens/s reading a prompt)"


def _detail_lines(meta: ModelMetadata, profile: MachineProfile | None = None) -> list[tuple[str, str]]:
    mem = _memory_json(meta)
    markers = ", ".join(f"{m.text} ({m.token_type.lower()})" for m in meta.markers) or "none"
    rows = [
        ("name", meta.name),
        ("path", str(meta.path)),
        ("architecture", meta.architecture),
        ("parameters", f"{meta.size_label or '?'} ({meta.parameters:,})"),
        ("quantization", meta.quantization),
        ("context (trained)", _opt(meta.n_ctx_train)),
        ("layers / embedding", f"{_opt(meta.block_count)} / {_opt(meta.embedding_length)}"),
        ("heads / KV heads", f"{_opt(meta.head_count)} / {_opt(meta.head_count_kv)}"),
        ("vocabulary", f"{_opt(meta.vocab_size)} ({meta.tokenizer_model or '?'})"),
        ("size", _size_text(meta.size_bytes, meta.shard_count)),
        ("template", template_words(meta)),
        ("BOS / EOS", f"{meta.bos_token or '-'} / {meta.eos_token or '-'}"),
        ("marker tokens", markers),
        ("memory", f"{format_bytes(_int(mem['total_bytes']))} at {mem['context_length']} tokens of context"),
    ]
    prediction = file_prediction(meta, profile)
    rows.append(("speed here", _speed_text(prediction) if prediction is not None else NOT_MEASURED))
    if meta.base_model:
        rows.append(("note", BASE_MODEL_NOTE))
    problem = metadata_problem(meta)
    if problem:
        rows.append(("problem", problem))
    template = _template_problem(meta)
    if template:
        rows.append(("template problem", template))
    if mem["warning"]:
        rows.append(("warning", str(mem["warning"])))
    return rows


def template_cell(meta: ModelMetadata) -> str:
    """The library table's TEMPLATE column: the family, or what a base model gets instead."""
    if meta.base_model:
        return f"none: {meta.builtin_template or 'plain'}, base model"
    return str(meta.template_family)


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0


def _opt(value: int | None) -> str:
    return "?" if value is None else str(value)


def _size_text(size: int, shards: int) -> str:
    return format_bytes(size) + (f" in {shards} shards" if shards > 1 else "")


def _print_details(metas: Sequence[ModelMetadata], profile: MachineProfile | None) -> None:
    for i, meta in enumerate(metas):
        if i:
            print()
        rows = _detail_lines(meta, profile)
        width = max(len(k) for k, _ in rows)
        for key, value in rows:
            print(f"{key.ljust(width)}  {cell(value)}")


def _describe(paths: Sequence[Path], *, as_json: bool) -> int:
    metas: list[ModelMetadata] = []
    status = EXIT_OK
    for path in paths:
        try:
            metas.append(read_metadata(path))
        except GGUFError as exc:
            _error(path, exc.reason)
            status = EXIT_USAGE
    profile = cached_profile()  # a header-only command: it never measures (catalogue and bench do)
    if as_json:
        print_json([_describe_json(m, profile) for m in metas])
    else:
        _print_details(metas, profile)
    return status


def _template_problem(meta: ModelMetadata) -> str | None:
    return template_problem(meta.chat_template, bos_token=meta.bos_token or "", eos_token=meta.eos_token or "")


def _error(path: Path, reason: str) -> None:
    sys.stderr.write(f"ember: {path}: {reason}\n")


def print_json(data: object) -> None:
    sys.stdout.write(strict_dumps(data, indent=2, ensure_ascii=False) + "\n")


# --- the library ----------------------------------------------------------------------------

_COLUMNS = ("NAME", "PARAMS", "QUANT", "CTX", "SIZE", "TEMPLATE", "SOURCE", "PATH")
_MAX_NAME = 40


def _row(entry: LibraryEntry) -> tuple[str, ...]:
    name = entry.name if len(entry.name) <= _MAX_NAME else entry.name[: _MAX_NAME - 1] + "…"
    meta = entry.metadata
    problem = entry.error or (_template_problem(meta) if meta is not None else None)
    path = str(entry.path) + (f"  ({problem})" if problem else "")
    if meta is None:
        return (name, "-", "-", "-", _size_text(entry.size_bytes, entry.shard_count), "-", str(entry.source), path)
    params = meta.size_label or format_parameters(meta.parameters)
    ctx = _opt(meta.n_ctx_train)
    size = _size_text(entry.size_bytes, entry.shard_count)
    return (name, params, meta.quantization, ctx, size, template_cell(meta), str(entry.source), path)


def _origin_json(known: dict[Path, Origin], path: Path) -> dict[str, object] | None:
    origin = known.get(Path(os.path.normcase(os.path.abspath(path))))
    return origin.to_json() if origin is not None else None


def _list_library(*, as_json: bool) -> int:
    entries = library_entries()
    if as_json:
        known = origins()
        print_json(
            [
                e.to_json()
                | {
                    "template_problem": _template_problem(e.metadata) if e.metadata else None,
                    "origin": _origin_json(known, e.path),
                }
                for e in entries
            ]
        )
    elif entries:
        print(format_table([_row(e) for e in entries], _COLUMNS))
    else:
        print("No models found.")
    return EXIT_OK
