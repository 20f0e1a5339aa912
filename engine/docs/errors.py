"""The documents feature's one error type: a file that cannot be read, named in one line."""

from __future__ import annotations

from pathlib import Path

from engine.docs.names import shown
from engine.errors import EngineError


class DocumentError(EngineError):
    """A document cannot be used: the message names the file and says why, in one line."""

    def __init__(self, path: Path | str, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        # The name escaped: a newline or an undecodable byte in it must not forge or break the line.
        super().__init__(f"{shown(Path(path).name)}: {reason}")
