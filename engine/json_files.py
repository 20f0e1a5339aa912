"""Reading a user's JSON file (a script, a schema, a config) with one-line errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.errors import ConfigError


def read_json(path: Path, what: str = "") -> Any:
    """The JSON value in `path`; ConfigError naming `what` when it cannot be read, parsed or nests too deeply."""
    label = f"{what} {path}" if what else str(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read {label}: {exc.strerror or exc}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{label} is not valid JSON: {exc}") from exc
    except RecursionError as exc:
        raise ConfigError(f"{label} is nested too deeply to read") from exc
