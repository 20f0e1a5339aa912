"""llama.cpp's own log, routed into Python logging at the right levels.

llama-cpp-python's default callback maps ggml levels wrongly (ERROR hidden, WARN printed)
and writes to fd 2. This one logs to `engine.llama_cpp` and keeps the recent lines so a
failed load can be explained with llama.cpp's real reason.
"""

from __future__ import annotations

import ctypes
import logging
from typing import Any

from engine.llama.process_state import PROCESS

log = logging.getLogger("engine.llama_cpp")

# ggml_log_level: NONE 0, DEBUG 1, INFO 2, WARN 3, ERROR 4, CONT 5
_LEVELS = {1: logging.DEBUG, 2: logging.DEBUG, 3: logging.WARNING, 4: logging.ERROR}

# Warnings about what Ember asked for on purpose, kept at DEBUG so they do not reach a user's
# terminal: an embedder asks for mean pooling on models (SmolLM2) that declare none.
_ASKED_FOR = ("default pooling_type is",)


def on_log(level: int, text: bytes | None, _user_data: Any) -> None:
    msg = (text or b"").decode("utf-8", "replace").rstrip("\n")
    py_level = PROCESS.last_log_level if level == 5 else _LEVELS.get(level, logging.DEBUG)
    if py_level == logging.WARNING and any(part in msg for part in _ASKED_FOR):
        py_level = logging.DEBUG
    PROCESS.last_log_level = py_level
    if not msg:
        return
    with PROCESS.log_lock:
        PROCESS.recent_log.append((py_level, msg))
    log.log(py_level, "%s", msg)


def install() -> None:
    """Install the callback once per process, before the first model load."""
    if PROCESS.log_callbacks:
        return
    import llama_cpp as lc

    cb = lc.llama_log_callback(on_log)
    lc.llama_log_set(cb, ctypes.c_void_p(0))
    PROCESS.log_callbacks.append(cb)


def install_mtmd() -> None:
    """The same for libmtmd (projectors, images), which keeps a log of its own; once per process."""
    if len(PROCESS.log_callbacks) > 1:
        return
    import llama_cpp as lc
    from llama_cpp import mtmd_cpp

    m: Any = mtmd_cpp  # its log setters' callback parameter is untyped
    cb = lc.llama_log_callback(on_log)
    m.mtmd_log_set(cb, ctypes.c_void_p(0))
    m.mtmd_helper_log_set(cb, ctypes.c_void_p(0))
    PROCESS.log_callbacks.append(cb)


def recent_messages() -> list[str]:
    with PROCESS.log_lock:
        return [m for _, m in PROCESS.recent_log]


def clear_recent() -> None:
    with PROCESS.log_lock:
        PROCESS.recent_log.clear()
