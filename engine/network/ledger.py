"""The network ledger: every connection Ember's process attempted, allowed or refused.

Each entry has the time, the destination, what was attempted (`connect`, `lookup`, `send`),
the verdict and the feature that asked (`remote server`, `MCP server files`, ...). The ledger
keeps the latest entries in memory for the window and appends each one to a JSON-lines file
in the data folder, so `ember doctor --network` shows what earlier runs did too. The file is
trimmed to its newer half when it passes `max_bytes`.

The file is a record anyone can replace, so it is treated as hostile: it is opened
non-blocking and used only when `fstat` says it is a regular file (a FIFO would hang every
connection and the doctor), only its last `TAIL_BYTES` are read (a 2 GB sparse file costs
no more than a full ledger), each line goes through the one JSON reader (depth-bounded,
non-finite numbers read as null), and what is shown is escaped (a newline in a destination
cannot forge a report line).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import stat
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

from models.library.json_input import JsonInputError, parse_json_input
from models.library.json_schema import strict_dumps
from models.text import escaped

log = logging.getLogger("engine.network")

LEDGER_FILE = "network-ledger.jsonl"
MEMORY_ENTRIES = 500
MAX_BYTES = 256 * 1024
TAIL_BYTES = 2 * MAX_BYTES  # what a reader takes from the end of the file, whatever its size
SHOWN_CHARS = 200  # a destination or feature longer than this is clipped when shown


@dataclass(frozen=True, slots=True)
class Attempt:
    time: float  # seconds since the epoch
    destination: str
    action: str  # connect | lookup | send
    allowed: bool
    feature: str

    @property
    def verdict(self) -> str:
        return "allowed" if self.allowed else "refused"

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"verdict": self.verdict}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Attempt | None:
        """An entry read back from the file; None unless every field has its type (a finite time)."""
        when, allowed = data.get("time"), data.get("allowed")
        texts = [data.get(k) for k in ("destination", "action", "feature")]
        if not (isinstance(when, int | float) and not isinstance(when, bool) and math.isfinite(when)):
            return None
        if not isinstance(allowed, bool) or not all(isinstance(t, str) for t in texts):
            return None
        destination, action, feature = cast(list[str], texts)
        return cls(float(when), destination, action, allowed, feature)

    def line(self) -> str:
        try:
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.time))
        except (OverflowError, OSError, ValueError):  # a time no calendar holds
            when = "(time unknown)     "
        return f"{when}  {self.verdict:<7}  {shown(self.action):<7}  {shown(self.destination)}  ({shown(self.feature)})"


def shown(text: str) -> str:
    """`text` on one line: control and other unprintable characters escaped, long text clipped."""
    return escaped(text[:SHOWN_CHARS] + "…" if len(text) > SHOWN_CHARS else text)


Listener = Callable[[Attempt], None]


class Ledger:
    """Thread-safe; listeners are called on the thread that made the attempt."""

    def __init__(self, path: Path | None = None, *, max_bytes: int = MAX_BYTES) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._recent: deque[Attempt] = deque(maxlen=MEMORY_ENTRIES)
        self._listeners: list[Listener] = []
        self.allowed_count = 0
        self.refused_count = 0

    def record(self, attempt: Attempt) -> None:
        with self._lock:
            self._recent.append(attempt)
            if not attempt.allowed:
                self.refused_count += 1
            elif attempt.action != "lookup":  # the count is of connections
                self.allowed_count += 1
            listeners = list(self._listeners)
            self._append(attempt)
        for listener in listeners:
            try:
                listener(attempt)
            except Exception:  # a broken view must never break a connection check
                log.exception("network ledger listener failed")

    def entries(self) -> list[Attempt]:
        """This process's attempts, oldest first (the latest MEMORY_ENTRIES)."""
        with self._lock:
            return list(self._recent)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        with self._lock:
            self._listeners.append(listener)

        def forget() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return forget

    def _append(self, attempt: Attempt) -> None:
        if self.path is None:
            return
        line = (strict_dumps(attempt.to_json(), ensure_ascii=False) + "\n").encode("utf-8")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = _open_regular(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            try:
                os.write(fd, line)
                size = os.fstat(fd).st_size
            finally:
                os.close(fd)
            if size > self.max_bytes:
                _keep_newer_half(self.path, self.max_bytes // 2)
        except OSError as exc:  # the ledger file is a record, not a gate: the verdict stands
            log.warning("could not write the network ledger %s: %s", self.path, exc)


def read_ledger_file(path: Path, limit: int | None = None) -> list[Attempt]:
    """The attempts recorded in the last TAIL_BYTES of `path` (all runs), oldest first.

    Anything but a regular file reads as empty; lines that are not an entry are skipped.
    """
    try:
        text = _tail(path, TAIL_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return []
    lines = text.splitlines()
    out: list[Attempt] = []
    for line in lines[-limit:] if limit else lines:
        try:
            data = parse_json_input(line)
        except JsonInputError:
            continue
        attempt = Attempt.from_json(cast(dict[str, Any], data)) if isinstance(data, dict) else None
        if attempt is not None:
            out.append(attempt)
    return out


def _open_regular(path: Path, flags: int) -> int:
    """A descriptor for `path`, opened without blocking (a FIFO would wait for a writer);
    OSError unless it is a regular file."""
    fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0), 0o600)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file (a pipe, socket or device)")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)  # a regular file: ordinary reads and writes from here
    except BaseException:
        os.close(fd)
        raise
    return fd


def _tail(path: Path, limit: int) -> bytes:
    """The last `limit` bytes of `path`, from the start of a line (a partial first line is dropped)."""
    fd = _open_regular(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        start = max(0, size - limit)
        data = os.pread(fd, limit, start) if hasattr(os, "pread") else _read_from(fd, start, limit)
    finally:
        os.close(fd)
    if start > 0:
        data = data[data.find(b"\n") + 1 :] if b"\n" in data else b""
    return data


def _read_from(fd: int, start: int, limit: int) -> bytes:
    os.lseek(fd, start, os.SEEK_SET)
    return os.read(fd, limit)


def _keep_newer_half(path: Path, keep: int) -> None:
    data = _tail(path, keep)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_bytes(data)
        tmp.replace(path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
