"""The scratch folder of a session without history, and the sweep of ones a dead process left.

History off means nothing is kept, but the conversation still needs a store while it runs
(one code path either way), so it lives in `ember-unsaved-<pid>-…` in the temp folder and is
removed on close. A process that is killed or crashes never closes it, and the conversation
would stay on disk; so each new scratch folder first removes this user's folders whose owning
process is gone. POSIX only: Windows has no harmless "is this pid alive" signal (os.kill there
terminates), and its temp folder is cleaned by the system.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

log = logging.getLogger("engine.session")

PREFIX = "ember-unsaved-"


def make_scratch() -> Path:
    """A new private scratch folder for this process, after sweeping dead processes' ones."""
    sweep(Path(tempfile.gettempdir()))
    return Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))


def sweep(folder: Path) -> int:
    """Remove this user's scratch folders whose process has ended; how many were removed."""
    if os.name != "posix":
        return 0
    removed = 0
    for path in folder.glob(f"{PREFIX}*"):
        pid = _owner_pid(path.name)
        try:
            if pid is None or path.is_symlink() or path.stat().st_uid != os.getuid() or _alive(pid):
                continue
        except OSError:
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed += 1
    if removed:
        log.info("removed %d scratch folder(s) of sessions without history left by ended processes", removed)
    return removed


def _owner_pid(name: str) -> int | None:
    """The pid in `ember-unsaved-<pid>-<random>`; None for any other name (left alone)."""
    head = name[len(PREFIX) :].split("-", 1)[0]
    return int(head) if head.isdecimal() else None  # not isdigit(): int("²") raises


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True
