"""The built-in model's fast copy: where it lives in the data folder and whether it can be trusted.

The shipped SmolLM2 file is Q4_1, a format llama.cpp runs without its repacked CPU kernels. On
first start the window converts it once in the background (`engine.backends.builtin_convert`)
and writes the verdict here as `builtin/fast.json`: the format chosen, the copy's SHA-256 and
the quality and speed figures, or why the shipped file stays. Until a verified copy exists the
shipped file serves. The copy is used only while its SHA-256 matches the record (hashed again
whenever its size or modification time changes, `digests.file_sha256`); a copy that does not
match is ignored and converted again.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, cast

from models.library.digests import file_sha256
from models.library.json_input import JsonInputError, read_json_input
from models.library.jsonstore import write_json_atomic
from models.library.paths import EmberPaths, ember_paths

FOLDER = "builtin"
RECORD = "fast.json"
CONVERTED, KEPT = "converted", "kept"  # the record's verdicts


def folder(paths: EmberPaths | None = None) -> Path:
    return (paths or ember_paths()).data_dir / FOLDER


def read_record(paths: EmberPaths | None = None) -> dict[str, Any] | None:
    try:
        data: Any = read_json_input(folder(paths) / RECORD)
    except JsonInputError:
        return None
    return cast(dict[str, Any], data) if isinstance(data, dict) else None


def write_record(record: dict[str, Any], paths: EmberPaths | None = None) -> None:
    folder(paths).mkdir(parents=True, exist_ok=True)
    write_json_atomic(folder(paths) / RECORD, record)


def source_stamp(shipped: Path) -> str:
    """Which shipped file a record is about: its name and size (a new wheel means a new verdict)."""
    return f"{shipped.name}:{shipped.stat().st_size}"


def fast_copy(shipped: Path, paths: EmberPaths | None = None) -> Path | None:
    """The verified fast copy of `shipped`, or None (none yet, kept, or it fails its SHA-256)."""
    record = read_record(paths)
    if record is None or record.get("verdict") != CONVERTED or record.get("source") != _stamp(shipped):
        return None
    name = record.get("file")
    if not isinstance(name, str) or "/" in name or "\\" in name:
        return None
    path = folder(paths) / name
    try:
        ok = path.is_file() and file_sha256(path, paths) == record.get("sha256")
    except OSError:
        return None
    return path if ok else None


def needs_conversion(shipped: Path, paths: EmberPaths | None = None) -> bool:
    """True when no verdict about this shipped file stands: none yet, another file, or a broken copy."""
    record = read_record(paths)
    if record is None or record.get("source") != _stamp(shipped):
        return True
    return record.get("verdict") == CONVERTED and fast_copy(shipped, paths) is None


def _stamp(shipped: Path) -> str | None:
    with contextlib.suppress(OSError):
        return source_stamp(shipped)
    return None
