"""Text from model files, servers and imported conversations, made safe for a terminal.

A GGUF's `general.name`, a server's error body or a stored title may hold `ESC[2J`
(clear the screen), `ESC]0;…` (retitle the window) or bidi overrides that reorder what
follows. Printed raw, the text controls the terminal instead of being read.

The one rule (one unsafe set, its renderings) is `models.text`; here are its terminal names:
- `safe_text` escapes every unsafe character except newline and tab as `\\uXXXX`; the
  same spelling is a JSON escape, so JSON output passed through it stays exact JSON.
- `safe_cell` also folds line breaks and tabs, for one-row-per-item tables.
- `label_text` is the window's counterpart: unsafe characters removed and line breaks
  folded, so a model named "evil\u202egnp.exe" reads as written in a label.
- `SafeStream` wraps a text stream so everything written to it goes through `safe_text`,
  except the two SGR sequences Ember itself writes for search highlights (bold on, all
  attributes off): they cannot move the cursor, clear, or retitle anything.
"""

from __future__ import annotations

import re
from typing import Any, TextIO

from engine.api.text import cell, is_safe, label, terminal

_ALLOWED_SGR = re.compile("(\x1b\\[[01]m)")  # bold on / attributes off, kept by SafeStream


def label_text(text: str) -> str:
    """`text` for a one-line label in the window: no control characters, no bidi marks."""
    return label(text)


def safe_text(text: str) -> str:
    """`text` with terminal control characters escaped (newlines and tabs kept)."""
    return terminal(text)


def safe_cell(text: str) -> str:
    """`text` made safe and put on one line: for a table cell or a one-line message."""
    return cell(text)


class SafeStream:
    """A text stream whose writes are passed through `safe_text`; everything else is delegated."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        parts = _ALLOWED_SGR.split(text)
        self._stream.write("".join(p if i % 2 else safe_text(p) for i, p in enumerate(parts)))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def has_controls(text: str) -> bool:
    """Whether `text` holds a control character, line break, tab or bidi mark (none belong in a title)."""
    return not is_safe(text)
