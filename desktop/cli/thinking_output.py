"""`ember chat --show-thinking`: thinking on stderr, set apart from the answer.

On a terminal stdout and stderr share one screen, so raw thinking ran straight into the
answer. The thinking is now framed by a line before it and a line after it (written once
the answer starts or the turn ends), so the two can be told apart on screen and when the
streams are redirected separately.
"""

from __future__ import annotations

from typing import TextIO

OPENING = "--- thinking ---\n"
CLOSING = "\n--- end of thinking ---\n"


class ThinkingPrinter:
    """Writes thinking deltas to `out`, framed; call `close()` when the answer begins."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._open = False

    def thinking(self, text: str) -> None:
        if not text:
            return
        if not self._open:
            self._out.write(OPENING)
            self._open = True
        self._out.write(text)
        self._out.flush()

    def close(self) -> None:
        """End the thinking block, if one is open (before the answer or at the turn's end)."""
        if self._open:
            self._out.write(CLOSING)
            self._out.flush()
            self._open = False
