"""The environment of a child process that runs Ember's own code (`python -c …`).

This checkout comes first on the child's import path, so the child imports the very code that
started it, whether Ember is installed or run from a source tree.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the folder holding `engine`, `models` and `desktop`


def child_env(**extra: str) -> dict[str, str]:
    """os.environ with this checkout first on PYTHONPATH, plus `extra`."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env
