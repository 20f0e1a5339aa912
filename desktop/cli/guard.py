"""The `ember` command's last line of defence: every failure becomes one line and a status.

    return run_guarded(lambda: command(args))

The commands report the failures they expect themselves. What reaches here is the
environment failing under them: a full disk, `EMBER_HOME` below a regular file, a closed
pipe (`ember chat … | head -c 20`), a terminal whose encoding cannot show a character, a
number too large for the database, an Ember error no command caught (e.g. the history
store's `HistoryError` when the disk fills mid-answer). Each is printed as one line
(`ember: …`, through `desktop.cli.common.fail`) with one of the exit codes defined there:

    EXIT_FAILED (1)         the environment (disk, folders, permissions)
    EXIT_USAGE (2)          bad input (a value out of range, a file too deeply nested to read)
    EXIT_INTERRUPTED (130)  interrupted (Ctrl+C)
    EXIT_BROKEN_PIPE (141)  the reader of stdout went away (as a process killed by SIGPIPE reports it)

`prepare_streams` makes stdout and stderr replace what they cannot encode instead of
raising, and passes them through `SafeStream` so control characters in model names,
server messages or stored titles cannot drive the terminal.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import sqlite3
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from desktop.cli.common import EXIT_BROKEN_PIPE, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE, fail
from engine.api.errors import EmberError
from engine.api.text import cell, terminal

_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)

_ALLOWED_SGR = re.compile("(\x1b\\[[01]m)")  # bold on / attributes off: Ember's own search highlights


class SafeStream:
    """A text stream whose writes are escaped (`terminal`), but for the two SGR sequences Ember
    itself writes for search highlights (bold on, all attributes off): they cannot move the
    cursor, clear, or retitle anything. Everything else is delegated."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        parts = _ALLOWED_SGR.split(text)
        self._stream.write("".join(p if i % 2 else terminal(p) for i, p in enumerate(parts)))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def run_guarded(command: Callable[[], int]) -> int:
    """Run `command`; any environment failure becomes one line on stderr and its status."""
    try:
        return command()
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except OSError as exc:
        return _report(_os_message(exc), EXIT_FAILED)
    except sqlite3.Error as exc:
        return _report(_sqlite_message(exc), EXIT_FAILED)
    except EmberError as exc:  # HistoryStore wraps sqlite3 errors: say a full disk as such
        cause = exc.__cause__
        return _report(_sqlite_message(cause) if isinstance(cause, sqlite3.Error) else str(exc), EXIT_FAILED)
    except (OverflowError, RecursionError, UnicodeError, MemoryError) as exc:
        return _report(_input_message(exc), EXIT_USAGE)


@contextmanager
def prepare_streams() -> Iterator[None]:
    """For the command's duration: stdout/stderr never raise on encoding, never pass controls."""
    logging.raiseExceptions = False  # a log write on a full disk must not dump a traceback
    saved = sys.stdout, sys.stderr
    for stream in saved:
        reconfigure: Any = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="replace")
            except (ValueError, OSError):  # a detached or closed stream
                pass
    sys.stdout, sys.stderr = SafeStream(saved[0]), SafeStream(saved[1])  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def _report(message: str, status: int) -> int:
    try:
        fail(cell(message), status)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass  # stderr itself is gone: the status still says it
    return status


def _silence_stdout() -> None:
    """After a broken pipe, point stdout at /dev/null so the exit-time flush is quiet too."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.__stdout__.fileno() if sys.__stdout__ else 1)
    except (OSError, ValueError, AttributeError):
        pass


def _os_message(exc: OSError) -> str:
    where = f" {exc.filename}" if exc.filename else ""
    if exc.errno in _DISK_FULL:
        return f"the disk is full; could not write{where}. Nothing already saved was lost; free some space and retry"
    if exc.errno == errno.ENOTDIR:
        return f"cannot use{where}: a part of the path is a file, not a folder (check EMBER_HOME)"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"cannot write{where}: {exc.strerror or 'permission denied'}"
    if exc.errno == errno.ELOOP:
        return f"cannot use{where}: a symbolic link loop"
    return f"{exc.strerror or type(exc).__name__}:{where}" if where else f"{exc.strerror or exc}"


def _sqlite_message(exc: sqlite3.Error) -> str:
    text = str(exc)
    if "full" in text:
        return "the disk is full; the history could not be saved. Nothing already saved was lost; free some space"
    if "readonly" in text or "unable to open" in text:
        return f"the history database cannot be written ({text})"
    return f"the history database failed: {text}"


def _input_message(exc: BaseException) -> str:
    if isinstance(exc, OverflowError):
        return "a number is too large"
    if isinstance(exc, RecursionError):
        return "the input is nested too deeply"
    if isinstance(exc, MemoryError):
        return "not enough memory for this input"
    return "the text is not valid UTF-8 (or cannot be encoded)"
