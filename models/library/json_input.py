"""The one reader for JSON that Ember did not write itself: settings, configs, scripts, schemas, imports.

Every such file goes through `read_json_input`, which refuses before parsing what could hang
or exhaust the machine — a FIFO, socket or device (opened non-blocking, checked with
`fstat`), a file over `max_bytes` (read at most `max_bytes + 1`) — and after parsing anything
nested deeper than `max_depth` (Python's own recursion limit stops the parser first on
absurd depths; both come back as the same one-line `JsonInputError`). Numbers JSON has
no room for (`NaN`, `Infinity`, `1e400`) are read as null. What each file may hold is its
schema (`models/library/json_schema.py`).
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any, cast

from models.errors import EmberError

MAX_DEPTH = 256
SETTINGS_MAX_BYTES = 16 * 1024 * 1024
CONFIG_MAX_BYTES = 16 * 1024 * 1024
IMPORT_MAX_BYTES = 1024 * 1024 * 1024


class NestedTooDeep(json.JSONDecodeError):
    """JSON text nested deeper than its reader allows, refused before parsing (`bounded_loads`)."""

    def __init__(self, max_depth: int, doc: str) -> None:
        super().__init__(f"nested more than {max_depth} levels deep", doc, 0)
        self.args = (self.msg,)  # no "line 1 column 1": the depth has no one place


class JsonInputError(EmberError):
    """A JSON input Ember cannot use; `str(err)` is one line without the path.

    `missing` is true when the file does not exist (callers with defaults use them quietly);
    `unreadable` when it could not be read at all (nothing to set aside).
    """

    def __init__(self, reason: str, *, missing: bool = False, unreadable: bool = False) -> None:
        super().__init__(reason)
        self.missing = missing
        self.unreadable = unreadable or missing


def read_json_input(path: Path, *, max_bytes: int = CONFIG_MAX_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value in `path`, or JsonInputError (one line) for any file Ember should not parse."""
    return parse_json_input(read_bytes_bounded(path, max_bytes), max_depth=max_depth)


def read_bytes_bounded(path: Path, max_bytes: int) -> bytes:
    """At most `max_bytes` of a regular file; JsonInputError for anything else or anything larger."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError as exc:
        raise JsonInputError("it does not exist", missing=True) from exc
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        raise JsonInputError(f"it cannot be opened ({_reason(exc)})", unreadable=True) from exc
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise JsonInputError("it is a folder, not a file", unreadable=True)
        if not stat.S_ISREG(info.st_mode):
            raise JsonInputError("it is not a regular file (a pipe, socket or device)", unreadable=True)
        if info.st_size > max_bytes:
            raise JsonInputError(f"it is larger than {_size(max_bytes)}")
        data = _read_at_most(fd, max_bytes + 1)
    except OSError as exc:
        raise JsonInputError(f"it cannot be read ({_reason(exc)})", unreadable=True) from exc
    finally:
        os.close(fd)
    if len(data) > max_bytes:  # grew after the fstat, or a file system that lies about sizes
        raise JsonInputError(f"it is larger than {_size(max_bytes)}")
    return data


def parse_json_input(data: bytes | str, *, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value of `data` (UTF-8 bytes or text), depth-checked; JsonInputError otherwise."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        value: Any = bounded_loads(text, max_depth=max_depth, parse_constant=_not_finite, parse_float=_finite_float)
    except UnicodeDecodeError as exc:
        raise JsonInputError(f"it is not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except (NestedTooDeep, RecursionError) as exc:
        raise JsonInputError(f"it is nested too deeply (more than {max_depth} levels)") from exc
    except json.JSONDecodeError as exc:
        raise JsonInputError(f"it is not valid JSON ({exc.msg}: line {exc.lineno} column {exc.colno})") from exc
    except ValueError as exc:  # an integer of more digits than Python converts
        raise JsonInputError(f"it is not valid JSON ({exc})") from exc
    return value


def _not_finite(_name: str) -> None:
    # NaN, Infinity and -Infinity are not JSON (Python writes them; strict parsers refuse them):
    # read as null, so no non-finite number gets into Ember's data.
    return None


def _finite_float(text: str) -> float | None:
    value = float(text)
    return value if math.isfinite(value) else None  # 1e400 overflows to inf: null too


_KEEP_NESTING = str.maketrans({chr(c): None for c in range(128) if chr(c) not in '[]{}"'})
_STRING = re.compile(r'"[^"]*"')  # once escapes are gone, a string is quote to quote
_INNERMOST = re.compile(r"[\[{][\]}]")
_C_PASSES = 8  # usual JSON nests less: these passes leave nothing, and no Python loop runs


def bounded_loads(text: str, *, max_depth: int = MAX_DEPTH, **options: Any) -> Any:
    """`json.loads`, but text nested deeper than `max_depth` is refused before it is parsed
    (`NestedTooDeep`, a `json.JSONDecodeError`): parsing it would reach Python's recursion
    limit, and a finalizer the garbage collector runs there fails for want of room
    (tests/test_bounded_json.py)."""
    if _nests_deeper(text, max_depth):
        raise NestedTooDeep(max_depth, text)
    return json.loads(text, **options)


def _nests_deeper(text: str, limit: int) -> bool:
    """Whether `text`'s brackets outside strings nest deeper than `limit`, found with C-speed
    string operations (a 107 MB export full of escapes: about 1 s, as long as parsing it)."""
    if text.count("[") + text.count("{") <= limit:
        return False
    plain = text.replace("\\\\", "").replace('\\"', "").translate(_KEEP_NESTING)
    brackets = _STRING.sub("", plain)
    done = 0
    while done < min(_C_PASSES, limit):  # each pass drops the innermost pairs: one level
        brackets, dropped = _INNERMOST.subn("", brackets)
        if not brackets:
            return False
        if not dropped:
            break
        done += 1
    depth = done  # what is left nests this much deeper than it shows
    for char in brackets:
        if char in "[{":
            depth += 1
            if depth > limit:
                return True
        elif char in "]}":
            depth -= 1
    return False


def json_depth(value: Any) -> int:
    """How deeply `value`'s lists and objects nest (a scalar is 0); iterative, so any depth is safe."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        children: list[object]
        if isinstance(item, dict):
            children = list(cast(dict[object, object], item).values())
        elif isinstance(item, list):
            children = cast(list[object], item)
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        stack.extend((child, depth) for child in children if type(child) in (dict, list))
    return deepest


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _reason(exc: BaseException) -> str:
    return (exc.strerror if isinstance(exc, OSError) else None) or str(exc)


def _size(n: int) -> str:
    return f"{n // (1024 * 1024)} MB" if n >= 1024 * 1024 else f"{n:,} bytes"
