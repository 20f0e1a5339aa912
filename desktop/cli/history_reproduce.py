"""`ember history show ID --reproduce [--message N]`: re-run a recorded reply from its receipt.

Prints one verdict line (and, with `--json`, the receipt digests and the re-run text).
Exit status 0 when it matches token for token, 1 when it differs, 2 when it cannot be re-run.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from desktop.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, fail
from engine.api.conversations import CannotReproduce, HistoryStore, reproduce
from engine.api.errors import EmberError, EngineError
from engine.api.models import DEFAULT_CONTEXT_LENGTH, KV_CACHE_TYPES
from engine.api.text import strict_dumps
from engine.api.values import Backend


def add_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--reproduce",
        action="store_true",
        help="re-run the last reply (or --message N) from its receipt and say whether it matches",
    )
    p.add_argument("--message", type=int, metavar="N", help="with --reproduce: the reply to re-run")


def run_reproduce(store: HistoryStore, conversation_id: int, args: argparse.Namespace) -> int:
    target = args.message if args.message is not None else _last_reply(store, conversation_id)
    if target is None:
        return fail(f"conversation {conversation_id} has no reply to re-run", EXIT_USAGE)
    if store.message(target).conversation_id != conversation_id:
        return fail(f"message {target} is not in conversation {conversation_id}", EXIT_USAGE)
    try:
        result = reproduce(store, target, _open_model, _library_files)
    except CannotReproduce as exc:
        return fail(f"cannot re-run: {exc}", EXIT_USAGE)
    except (EngineError, EmberError) as exc:
        return fail(f"re-running reply {target} failed: {exc}", EXIT_FAILED)
    if args.json:
        sys.stdout.write(strict_dumps(result.to_json(), ensure_ascii=False, indent=2) + "\n")
    else:
        sys.stdout.write(result.line + "\n")
    return EXIT_OK if result.matched else EXIT_FAILED


def _last_reply(store: HistoryStore, conversation_id: int) -> int | None:
    replies = [m.id for m in store.path(conversation_id) if m.role == "assistant"]
    return replies[-1] if replies else None


def _open_model(path: Path, receipt: Mapping[str, Any]) -> Backend:
    from engine.api.models import open_llama

    on_cpu = str(receipt.get("device", "")).startswith("CPU")  # the same kind of device: same arithmetic
    n_ctx = int(receipt.get("context_size") or DEFAULT_CONTEXT_LENGTH)  # checked by check_receipt
    cache = receipt.get("kv_cache")
    kv_type = cache.get("type") if isinstance(cache, dict) else None
    backend = open_llama(
        path,
        n_ctx=n_ctx,
        n_gpu_layers=0 if on_cpu else -1,
        kv_cache=kv_type if isinstance(kv_type, str) and kv_type in KV_CACHE_TYPES else "f16",
    )
    if isinstance(receipt.get("prompt_lookup"), bool):  # drafting verifies tokens in batches: same as recorded
        backend.prompt_lookup = bool(receipt["prompt_lookup"])
    return backend


def _library_files() -> Iterator[Path]:
    from engine.api.library import library_entries

    for entry in library_entries(read=False):
        yield entry.path
