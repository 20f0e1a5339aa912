"""Reading a user's JSON file (a script, a schema, a config) with one-line errors.

The file goes through the one bounded reader (`models.library.json_input`): no pipes or
devices, at most `max_bytes`, nested at most `max_depth` levels.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.errors import ConfigError
from models.library.json_input import CONFIG_MAX_BYTES, MAX_DEPTH, JsonInputError, read_json_input


def read_json(path: Path, what: str = "", *, max_bytes: int = CONFIG_MAX_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value in `path`; ConfigError naming `what` and the path when Ember cannot use it."""
    label = f"{what} {path}" if what else str(path)
    try:
        return read_json_input(path, max_bytes=max_bytes, max_depth=max_depth)
    except JsonInputError as exc:
        verb = "read" if exc.unreadable else "use"
        raise ConfigError(f"cannot {verb} {label}: {exc}") from exc
