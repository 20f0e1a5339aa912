"""Where Ember keeps its config, data and logs.

`EMBER_HOME`, when set, holds everything (tests point it at a temporary folder);
otherwise platformdirs picks the platform's usual places.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from models.errors import GGUFError

APP_NAME = "ember"


def resolve_model_file(path: Path) -> Path:
    """`path` made absolute with its links followed; GGUFError (one line) for a link loop.

    Before Python 3.13 `Path.resolve()` raises a bare RuntimeError on a symbolic link loop;
    it becomes an Ember error here, once, so no caller has to catch RuntimeError.
    """
    try:
        return path.expanduser().resolve()
    except RuntimeError as exc:
        raise GGUFError("the path is a symbolic link loop", path) from exc


@dataclass(frozen=True, slots=True)
class EmberPaths:
    config_dir: Path
    data_dir: Path
    log_dir: Path

    @property
    def models_dir(self) -> Path:
        return self.data_dir / "models"

    @property
    def history_db(self) -> Path:
        return self.data_dir / "history.sqlite3"

    def ensure(self) -> EmberPaths:
        for d in (self.config_dir, self.data_dir, self.log_dir):
            d.mkdir(parents=True, exist_ok=True)
        return self


def ember_paths() -> EmberPaths:
    """The current paths, read from the environment on every call (tests change it)."""
    home = os.environ.get("EMBER_HOME")
    if home:
        root = Path(home).expanduser()
        return EmberPaths(root / "config", root / "data", root / "logs")
    return EmberPaths(
        Path(platformdirs.user_config_dir(APP_NAME, appauthor=False)),
        Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)),
        Path(platformdirs.user_log_dir(APP_NAME, appauthor=False)),
    )
