"""llama.cpp's own log, routed into Python logging at the right levels.

llama-cpp-python's default callback maps ggml levels wrongly (ERROR hidden, WARN printed)
and writes to fd 2. This one logs to `engine.llama_cpp` and keeps the recent lines so a
failed load can be explained with llama.cpp's real reason.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from collections import deque
from typing import Any

log = logging.getLogger("engine.llama_cpp")

# ggml_log_level: NONE 0, DEBUG 1, INFO 2, WARN 3, ERROR 4, CONT 5
_LEVELS = {1: logging.DEBUG, 2: logging.DEBUG, 3: logging.WARNING, 4: logging.ERROR}

# Warnings about what Ember asked for on purpose, kept at DEBUG so they do not reach a user's
# terminal: an embedder asks for mean pooling on models (SmolLM2) that declare none.
_ASKED_FOR = ("default pooling_type is",)

_recent: deque[tuple[int, str]] = deque(maxlen=64)
_lock = threading.Lock()
_installed: list[Any] = []  # keeps the ctypes callback alive for the life of the process
_last_level = logging.DEBUG


def on_log(level: int, text: bytes | None, _user_data: Any) -> None:
    global _last_level
    msg = (text or b"").decode("utf-8", "replace").rstrip("\n")
    py_level = _last_level if level == 5 else _LEVELS.get(level, logging.DEBUG)
    if py_level == logging.WARNING and any(part in msg for part in _ASKED_FOR):
        py_level = logging.DEBUG
    _last_level = py_level
    if not msg:
        return
    with _lock:
        _recent.append((py_level, msg))
    log.log(py_level, "%s", msg)


def install() -> None:
    """Install the callback once per process, before the first model load."""
    if _installed:
        return
    import llama_cpp as lc

    cb = lc.llama_log_callback(on_log)
    lc.llama_log_set(cb, ctypes.c_void_p(0))
    _installed.append(cb)


def install_mtmd() -> None:
    """The same for libmtmd (projectors, images), which keeps a log of its own; once per process."""
    if len(_installed) > 1:
        return
    import llama_cpp as lc
    from llama_cpp import mtmd_cpp

    m: Any = mtmd_cpp  # its log setters' callback parameter is untyped
    cb = lc.llama_log_callback(on_log)
    m.mtmd_log_set(cb, ctypes.c_void_p(0))
    m.mtmd_helper_log_set(cb, ctypes.c_void_p(0))
    _installed.append(cb)


def recent_messages() -> list[str]:
    with _lock:
        return [m for _, m in _recent]


def clear_recent() -> None:
    with _lock:
        _recent.clear()
