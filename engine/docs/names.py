"""File and collection names as Ember shows and stores them, whatever bytes they hold.

A file name is whatever bytes the file system allows: a newline (which forges a line of output),
ESC, a bidi override, or bytes that are not UTF-8 (Python hands those over as lone surrogates,
`os.fsdecode`'s surrogateescape). Ember keeps the real name to open the file, and shows an escaped
one everywhere a person reads it:

- `shown(text)`: controls, line breaks, bidi marks and lone surrogates escaped (`\\n`, `\\u202e`,
  `\\xff` for an undecodable byte), so one name is always one visible run of text (the one
  rule of `models.text`, as every other name Ember shows);
- `db_path(path)` / `path_of(value)`: how a path goes into SQLite (text when it is valid UTF-8, the
  file system's bytes otherwise; SQLite text must be UTF-8) and comes back as the same `str`.

Collection names are chosen by the user and kept as text: `check_collection_name` refuses control
characters and names past NAME_MAX_CHARS in one line.
"""

from __future__ import annotations

import os

from engine.errors import EngineError
from models.text import escaped, is_safe

NAME_MAX_CHARS = 200


def shown(text: str) -> str:
    """`text` as one safe visible run: every control, break, bidi mark and undecodable byte escaped."""
    return escaped(text)


def db_path(path: str) -> str | bytes:
    """A path as SQLite can hold it: text when valid UTF-8, else the file system's bytes."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(path)
    return path


def path_of(value: str | bytes) -> str:
    """A path read back from SQLite (see `db_path`)."""
    return os.fsdecode(value) if isinstance(value, bytes) else value


class CollectionNameError(EngineError):
    """A collection name that cannot be used (one line)."""


def check_collection_name(name: str) -> str:
    """The name, stripped; CollectionNameError for an empty, too long or control-holding one."""
    name = name.strip()
    if not name:
        raise CollectionNameError("a collection needs a name")
    if len(name) > NAME_MAX_CHARS:
        raise CollectionNameError(
            f"a collection name is at most {NAME_MAX_CHARS} characters (this one has {len(name):,})"
        )
    if not is_safe(name):
        raise CollectionNameError(
            f"a collection name cannot hold control characters, line breaks or bidi marks ({shown(name)})"
        )
    return name
