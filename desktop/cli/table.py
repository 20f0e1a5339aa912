"""Plain-text tables for the command line (the model library, Hub search results)."""

from __future__ import annotations

from collections.abc import Sequence

from engine.api.text import cell


def format_table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    """Columns padded to their widest cell; the last column is left ragged."""
    table = [tuple(header), *(tuple(cell(c) for c in r) for r in rows)]  # one line per item
    widths = [max(len(r[i]) for r in table) for i in range(len(header) - 1)]
    lines = ["  ".join([*(c.ljust(w) for c, w in zip(r, widths, strict=False)), r[-1]]) for r in table]
    return "\n".join(line.rstrip() for line in lines)
