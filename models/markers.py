"""Thinking and tool-call marker strings, as they appear in model vocabularies.

A marker that is one token in a model's vocabulary arrives whole from the backend and can
be matched by token id; any other marker arrives spelled out in pieces and must be matched
by text. The metadata reader reports which of these are single tokens (and their token
types: CONTROL tokens are hidden by llama.cpp's detokenizer, USER_DEFINED ones print).
The strings come from the one table of formats, `models.formats`.
"""

from __future__ import annotations

from models.formats import MarkerKind, vocabulary_markers

__all__ = ["ALL_MARKERS", "MARKER_BYTES", "MarkerKind", "marker_kind"]

_KINDS = vocabulary_markers()
ALL_MARKERS: frozenset[str] = frozenset(_KINDS)

# Encoded once: the vocabulary scan compares raw token bytes.
MARKER_BYTES: frozenset[bytes] = frozenset(m.encode() for m in ALL_MARKERS)


def marker_kind(marker: str) -> MarkerKind:
    return _KINDS.get(marker, MarkerKind.TOOL_CALL)
