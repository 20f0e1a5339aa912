"""Showing what the engine hands out: the one escaper for untrusted text, and strict JSON.

Every front end shows a model's name, a file name or a server's error through `models.text`'s
one unsafe set (`escaped`, `terminal`, `cell`, `label`); JSON goes out strict (`strict_dumps`:
no NaN) and its numbers are checked the same way as the engine's; JSON comes in depth-bounded
(`bounded_loads`: refused before parsing past the recursion limit). Names only, and light:
`ember --version` imports this module.
"""

from __future__ import annotations

from models.library.json_input import NestedTooDeep, bounded_loads
from models.library.json_schema import is_int, is_number, strict_dumps
from models.text import cell, escaped, is_safe, json_text, label, terminal

__all__ = [
    "NestedTooDeep",
    "bounded_loads",
    "cell",
    "escaped",
    "is_int",
    "is_number",
    "is_safe",
    "json_text",
    "label",
    "strict_dumps",
    "terminal",
]
