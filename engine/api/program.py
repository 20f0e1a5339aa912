"""The program around the engine: its version, its log, its folders and settings files, its children.

`ember` sets up its log and prints its version here; the window keeps its own small settings
files (window state, appearance, the last folder) with the same atomic writes as the engine's;
a front end that runs a function in a child process (the CLI's hard stop, the fast-copy offer)
starts it with the engine's child environment. Names only.
"""

from __future__ import annotations

from engine import __version__
from engine.child_env import function_child
from engine.logsetup import configure_logging
from models.library.jsonstore import load_json_object, write_json_atomic, write_text_atomic
from models.library.paths import EmberPaths, ember_paths

__all__ = [
    "EmberPaths",
    "__version__",
    "configure_logging",
    "ember_paths",
    "function_child",
    "load_json_object",
    "write_json_atomic",
    "write_text_atomic",
]
