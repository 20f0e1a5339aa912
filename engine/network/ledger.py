"""The network ledger: every connection Ember's process attempted, allowed or refused.

Each entry has the time, the destination, what was attempted (`connect`, `lookup`, `send`),
the verdict and the feature that asked (`remote server`, `MCP server files`, ...). The ledger
keeps the latest entries in memory for the window and appends each one to a JSON-lines file
in the data folder, so `ember doctor --network` shows what earlier runs did too. The file is
trimmed to its newer half when it passes `max_bytes`.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

log = logging.getLogger("engine.network")

LEDGER_FILE = "network-ledger.jsonl"
MEMORY_ENTRIES = 500
MAX_BYTES = 256 * 1024


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
        try:
            return cls(float(data["time"]), str(data["destination"]), str(data["action"]),
                       bool(data["allowed"]), str(data["feature"]))
        except (KeyError, TypeError, ValueError):
            return None

    def line(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.time))
        return f"{when}  {self.verdict:<7}  {self.action:<7}  {self.destination}  ({self.feature})"


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
            if attempt.allowed:
                self.allowed_count += 1
            else:
                self.refused_count += 1
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
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(attempt.to_json(), ensure_ascii=False) + "\n")
            if self.path.stat().st_size > self.max_bytes:
                _keep_newer_half(self.path)
        except OSError as exc:  # the ledger file is a record, not a gate: the verdict stands
            log.warning("could not write the network ledger %s: %s", self.path, exc)


def read_ledger_file(path: Path, limit: int | None = None) -> list[Attempt]:
    """The attempts recorded in `path` (all runs), oldest first; unreadable lines are skipped."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    out: list[Attempt] = []
    for line in lines[-limit:] if limit else lines:
        try:
            data = json.loads(line)
        except ValueError:
            continue
        attempt = Attempt.from_json(cast(dict[str, Any], data)) if isinstance(data, dict) else None
        if attempt is not None:
            out.append(attempt)
    return out


def _keep_newer_half(path: Path) -> None:
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(lines[len(lines) // 2 :]), encoding="utf-8")
    tmp.replace(path)
