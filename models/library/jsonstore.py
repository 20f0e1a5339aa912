"""Small JSON files in the config directory: atomic writes, reads that never crash.

Writes go to a temporary file in the same directory, are fsynced, then `os.replace`d over
the old file, so a crash leaves either the old or the new file, never a half-written
one and never none (GPT4All's delete-then-rename lost chats that way). A file that does
not parse is kept aside as `<name>.corrupt-<time>` for the user and replaced by defaults.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import cast

log = logging.getLogger(__name__)


def _fsync_dir(folder: Path) -> None:
    # Makes the rename itself durable on POSIX; Windows cannot open directories.
    if os.name != "posix":
        return
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_json_atomic(path: Path, data: object) -> None:
    """Write `data` as JSON to `path` atomically (temp file, fsync, os.replace).

    The file ends up readable by its owner only (mkstemp's mode 0600 survives the replace).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, ensure_ascii=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _back_up(path: Path) -> Path | None:
    backup = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
    try:
        os.replace(path, backup)
    except OSError:
        return None
    return backup


def load_json_object(path: Path, defaults: Mapping[str, object]) -> dict[str, object]:
    """The JSON object in `path`; `defaults` when the file is missing or unreadable.

    A file that is not a JSON object is backed up and replaced with `defaults` (logged as a
    warning): bad settings must never stop Ember from starting.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return dict(defaults)
    except (OSError, UnicodeDecodeError) as exc:
        log.warning("cannot read %s (%s); using defaults", path, exc)
        return dict(defaults)
    try:
        data: object = json.loads(text)
    except ValueError as exc:
        return _replace_corrupt(path, defaults, f"not valid JSON: {exc}")
    if not isinstance(data, dict):
        return _replace_corrupt(path, defaults, "not a JSON object")
    return string_keys(cast(dict[object, object], data))


def string_keys(data: Mapping[object, object]) -> dict[str, object]:
    """A JSON object's items with their keys as str (for typed code downstream)."""
    return {str(k): v for k, v in data.items()}


def _replace_corrupt(path: Path, defaults: Mapping[str, object], why: str) -> dict[str, object]:
    backup = _back_up(path)
    if backup is None:  # never overwrite a file we could not keep a copy of
        log.warning("%s is %s and could not be backed up; using defaults", path, why)
        return dict(defaults)
    log.warning("%s is %s; kept as %s and replaced with defaults", path, why, backup)
    with contextlib.suppress(OSError):
        write_json_atomic(path, dict(defaults))
    return dict(defaults)
