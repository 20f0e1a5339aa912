"""Per-machine verdicts (CPU variant, GPU devices, projector probes, speeds): one JSON file each
in Ember's cache folder, entries by key. A leaf: the modules that keep verdicts all use it."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from models.library.jsonstore import load_json_object, write_json_atomic

log = logging.getLogger("engine.llama")

CACHE_ENV = "EMBER_CACHE_DIR"  # where machine-level verdicts live (tests point it at a temp folder)


def cache_dir() -> Path:
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir("ember", appauthor=False))


def read_entry(name: str, key: str) -> Any:
    """The entry under `key` in the cache file `name` (None when there is none); the caller checks its type."""
    return load_json_object(cache_dir() / name, {}).get(key)


def write_entry(name: str, key: str, entry: object, keep: int = 1) -> None:
    """Store `entry` under `key`, keeping the newest `keep` entries (1: one machine, one entry, so a
    newer build or CPU replaces the old verdict). A read-only cache folder: measured again next time."""
    path = cache_dir() / name
    entries = {k: v for k, v in load_json_object(path, {}).items() if k != key} if keep > 1 else {}
    entries[key] = entry
    try:
        write_json_atomic(path, dict(list(entries.items())[-keep:]))
    except OSError as exc:
        log.info("could not cache a verdict in %s: %s", path, exc)
