"""One rule for showing untrusted text: one set of unsafe characters, three renderings.

A GGUF's `general.name`, a file name, a server's error body or a stored title may hold
`ESC[2J` (clear the screen), `ESC]0;…` (retitle the window), a line separator that breaks a
table row, bidi marks that reorder what follows, or (a file name that is not UTF-8) lone
surrogates. The same bytes must read the same wherever Ember shows them:

- `escaped`: every unsafe character spelled out, so any text is one visible run (logs,
  one-line errors, names in a terminal);
- `terminal`: the same, but newlines and tabs kept (multi-line text in a terminal);
- `cell`: line breaks and tabs folded to a space, then escaped (table cells);
- `label`: line breaks folded, unsafe characters removed (the window: a label is read, not copied).

Spellings are JSON escapes (`\\n`, `\\t`, `\\u001b`), so JSON passed through `terminal`
stays exact JSON; an undecodable file-name byte (surrogateescape) reads as `\\xff`.
The leaf of the tree: it imports nothing of Ember's.
"""

from __future__ import annotations

import re
from typing import Any, cast

# C0 controls, DEL, C1 controls, the line and paragraph separators, the invisible direction
# marks (ALM, LRM, RLM), the bidi embeddings, overrides and isolates, and lone surrogates.
UNSAFE = "\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_UNSAFE = re.compile(f"[{UNSAFE}]")
# What a terminal may keep of it: newline, tab and the \r of a \r\n line ending.
_UNSAFE_IN_TERMINAL = re.compile(f"(?![\\n\\t\\r])[{UNSAFE}]|\r(?!\n)")
_BREAKS = re.compile("[\t\r\n\u2028\u2029]+")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # surrogateescape: the file name's original byte
        return f"\\x{code - 0xDC00:02x}"
    return _NAMED.get(char) or f"\\u{code:04x}"


def escaped(text: str) -> str:
    """`text` as one safe visible run: every unsafe character escaped, line breaks included."""
    return _UNSAFE.sub(_escape, text)


def terminal(text: str) -> str:
    """`text` for a terminal: unsafe characters escaped, newlines, tabs and \\r\\n kept."""
    return _UNSAFE_IN_TERMINAL.sub(_escape, text)


def cell(text: str) -> str:
    """`text` on one line and safe: for a table cell or a one-line message."""
    return escaped(_BREAKS.sub(" ", text))


def label(text: str) -> str:
    """`text` for a one-line label in the window: breaks folded, unsafe characters removed."""
    return _UNSAFE.sub("", _BREAKS.sub(" ", text))


def is_safe(text: str) -> bool:
    """Whether `text` holds no unsafe character (newline and tab count as unsafe)."""
    return _UNSAFE.search(text) is None


def surrogates_escaped(text: str) -> str:
    """Only the lone surrogates escaped: what UTF-8 output needs, every other character exact."""
    return re.sub("[\ud800-\udfff]", _escape, text)


def json_text(value: Any) -> Any:
    """`value` (JSON-shaped) with lone surrogates in its strings escaped, so it can be written as UTF-8.

    Only those: JSON output keeps every other character of a path exactly (JSON escapes controls).
    """
    if isinstance(value, str):
        return surrogates_escaped(value)
    if isinstance(value, dict):
        return {json_text(k): json_text(v) for k, v in cast(dict[Any, Any], value).items()}
    if isinstance(value, list | tuple):
        return [json_text(v) for v in cast(list[Any], value)]
    return value
