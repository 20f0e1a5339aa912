"""Deleting a model Ember downloaded: its file, every shard, leftover `.part` files, and its origin record.

Only files Ember owns are ever deleted: those whose download it recorded (`origins`) and
those inside its own models folder. A file the user added from elsewhere is only taken off
the library's list (`LibraryState.without_recent`); the built-in model is never touched.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from models.errors import EmberError
from models.gguf.meta import shard_paths
from models.library.origins import forget_origin, origin_of
from models.library.paths import EmberPaths


class RemoveRefused(EmberError):
    """The file is not one Ember may delete; the message says why in one line."""


def owned_by_ember(path: Path, paths: EmberPaths) -> bool:
    """Whether Ember downloaded `path` or keeps it in its models folder (so `rm` may delete it)."""
    return origin_of(path, paths) is not None or _inside(path, paths.models_dir)


def remove_model(path: Path, paths: EmberPaths) -> list[Path]:
    """Delete `path` (a model Ember owns) with its shards and `.part` leftovers; returns what was deleted."""
    path = Path(os.path.abspath(path))
    if not owned_by_ember(path, paths):
        raise RemoveRefused(
            f"{path} was not downloaded by Ember and is not in its models folder; Ember deletes only its own files"
        )
    deleted: list[Path] = []
    for shard in shard_paths(path):
        for candidate in (shard, shard.with_name(shard.name + ".part"), shard.with_name(shard.name + ".part.json")):
            if candidate.is_file() or candidate.is_symlink():
                candidate.unlink()
                deleted.append(candidate)
        forget_origin(shard, paths)
    _prune_empty(path.parent, paths.models_dir)
    return deleted


def _inside(path: Path, folder: Path) -> bool:
    try:
        Path(os.path.abspath(path)).relative_to(os.path.abspath(folder))
    except ValueError:
        return False
    return True


def _prune_empty(folder: Path, top: Path) -> None:
    """Remove the now empty folders between `folder` and the models folder (never the models folder)."""
    top = Path(os.path.abspath(top))
    while _inside(folder, top) and folder != top:
        with contextlib.suppress(OSError):
            folder.rmdir()  # only succeeds when empty
        if folder.exists():
            return
        folder = folder.parent
