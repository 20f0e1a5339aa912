"""Small JSON files in the config directory: atomic writes, reads that never crash.

Writes go to a temporary file in the same directory, are fsynced, then `os.replace`d over
the old file, so a crash leaves either the old or the new file, never a half-written
one and never none (GPT4All's delete-then-rename lost chats that way). A file that does
not parse is kept aside as `<name>.corrupt-<time>` for the user and replaced by defaults.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import cast

from models.library.json_input import SETTINGS_MAX_BYTES, JsonInputError, read_json_input
from models.library.json_schema import Schema, conform, strict_dumps

log = logging.getLogger(__name__)


def fsync_dir(folder: Path) -> None:
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
    _replace_with(path, strict_dumps(data, indent=2, ensure_ascii=False) + "\n", mode=None)


def write_text_atomic(path: Path, text: str) -> None:
    """Write `text` to a user-chosen `path` (an export) so a failure leaves the old file whole.

    A regular file (or a new one) is replaced atomically and keeps its permissions (a new one
    gets the usual umask ones); anything else (`/dev/stdout`, a pipe) is written in place,
    since replacing a device node with a file would be wrong. OSError on failure.
    """
    try:
        info = os.stat(path)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    else:
        if not stat.S_ISREG(info.st_mode):
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            return
        mode = stat.S_IMODE(info.st_mode)
    _replace_with(path, text, mode=mode)


def _replace_with(path: Path, text: str, *, mode: int | None) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def _umask() -> int:
    current = os.umask(0o022)  # the only way to read it; set straight back
    os.umask(current)
    return current


def _back_up(path: Path) -> Path | None:
    backup = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
    try:
        os.replace(path, backup)
    except OSError:
        return None
    return backup


def load_json_object(path: Path, defaults: Mapping[str, object], schema: Schema | None = None) -> dict[str, object]:
    """The JSON object in `path`; `defaults` when the file is missing or unusable.

    `schema` (the file's fields and their checks) sets aside each field of the wrong type or
    value with a warning; `defaults` then supplies it. Unknown fields are kept.

    The file goes through the bounded reader (no pipes or devices, at most
    `SETTINGS_MAX_BYTES`, nested at most `MAX_DEPTH`). One that cannot be parsed or is not a
    JSON object is set aside as `.corrupt-…` and replaced with `defaults` (logged as a
    warning): bad settings must never stop Ember from starting, at this start or the next.
    """
    try:
        data: object = read_json_input(path, max_bytes=SETTINGS_MAX_BYTES)
    except JsonInputError as exc:
        if exc.missing:
            return dict(defaults)
        if exc.unreadable:  # nothing we could copy aside: leave it be
            log.warning("cannot read %s (%s); using defaults", path, exc)
            return dict(defaults)
        return _replace_corrupt(path, defaults, str(exc))
    if not isinstance(data, dict):
        return _replace_corrupt(path, defaults, "not a JSON object")
    found = string_keys(cast(dict[object, object], data))
    if schema is None:
        return found
    return {**defaults, **conform(found, schema, str(path))}


def string_keys(data: Mapping[object, object]) -> dict[str, object]:
    """A JSON object's items with their keys as str (for typed code downstream)."""
    return {str(k): v for k, v in data.items()}


def _replace_corrupt(path: Path, defaults: Mapping[str, object], why: str) -> dict[str, object]:
    backup = _back_up(path)
    if backup is None:  # never overwrite a file we could not keep a copy of
        log.warning("%s: %s, and it could not be set aside; using defaults", path, why)
        return dict(defaults)
    log.warning("%s: %s; kept as %s and replaced with defaults", path, why, backup)
    with contextlib.suppress(OSError):
        write_json_atomic(path, dict(defaults))
    return dict(defaults)
