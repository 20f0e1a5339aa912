"""The folder for per-machine verdicts (CPU variant, GPU devices, projector probes, speeds): a leaf."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "EMBER_CACHE_DIR"  # where machine-level verdicts live (tests point it at a temp folder)


def cache_dir() -> Path:
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir("ember", appauthor=False))
