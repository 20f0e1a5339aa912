"""Opening a document only when it is a regular file: never a pipe, a device, a socket or a link.

A FIFO named `notes.txt` blocks `open()` until someone writes to it, and a link to `/dev/zero`
reads forever, so every file Ember reads for documents is looked at first (`lstat` for a file
found in a folder, where a link is refused; `stat` for a file named by the user, already
resolved) and then opened with `O_NONBLOCK` (a FIFO swapped in after the look cannot block the
open) and `O_NOFOLLOW` where links are refused, and checked again with `fstat` on the open
descriptor before a byte is read.

    reason = not_regular(path, follow=False)   # '' for a regular file
    with open_regular(path, follow=False) as f: ...   # NotRegular (one-line reason) otherwise
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_BINARY = getattr(os, "O_BINARY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class NotRegular(OSError):
    """The path is not a regular file (the message says what it is)."""


def kind_reason(mode: int) -> str:
    """'' for a regular file, else what it is, as the end of a one-line reason."""
    if stat.S_ISREG(mode):
        return ""
    if stat.S_ISLNK(mode):
        return "is a symbolic link; links inside a folder are not followed"
    if stat.S_ISDIR(mode):
        return "is a folder"
    if stat.S_ISFIFO(mode):
        return "is a pipe (FIFO), not a regular file; skipped"
    if stat.S_ISSOCK(mode):
        return "is a socket, not a regular file; skipped"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "is a device, not a regular file; skipped"
    return "is not a regular file; skipped"


def not_regular(path: Path, *, follow: bool) -> str:
    """Why `path` cannot be read as a document ('' when it can), without opening it."""
    try:
        st = os.stat(path, follow_symlinks=follow)
    except FileNotFoundError:
        return "not found"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    except ValueError:  # a name the file system cannot hold (a NUL)
        return "not found"
    return kind_reason(st.st_mode)


def open_regular(path: Path, *, follow: bool = True) -> BinaryIO:
    """`path` opened for binary reading; NotRegular when it is not (or no longer) a regular file."""
    flags = os.O_RDONLY | _NONBLOCK | _BINARY | _CLOEXEC | (0 if follow else _NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if not follow and _NOFOLLOW and os.path.islink(path):
            raise NotRegular(kind_reason(stat.S_IFLNK)) from exc
        raise
    try:
        reason = kind_reason(os.fstat(fd).st_mode)
        if reason:
            raise NotRegular(reason)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
