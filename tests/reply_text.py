"""One-shot forms of the reply's streaming filters, for tests: a whole reply given as text."""

from __future__ import annotations

from collections.abc import Iterable

from engine.events import Piece
from engine.reply.reasoning import ThinkingSplitter
from engine.reply.scaffolding import DEFAULT_REGISTRY, ScaffoldingFilter, ScaffoldPattern


def registry_markers(registry: Iterable[ScaffoldPattern] = DEFAULT_REGISTRY) -> frozenset[str]:
    """Every start, end and standalone marker string, for building token-id sets."""
    markers: set[str] = set()
    for pattern in registry:
        markers.add(pattern.start)
        if pattern.end:
            markers.add(pattern.end)
    return frozenset(markers)


def strip_scaffolding(text: str) -> str:
    """One-shot convenience: the visible text of a whole reply."""
    f = ScaffoldingFilter()
    return f.feed(text) + f.flush()


def split_thinking(text: str, *, prefilled: str = "") -> tuple[str, str]:
    """One-shot convenience: (thinking, content) of a whole reply given as text."""
    splitter = ThinkingSplitter(prefilled)
    pairs = splitter.feed_piece(Piece(text)) + splitter.flush()
    thinking = "".join(p.text for ch, p in pairs if ch == "thinking")
    content = "".join(p.text for ch, p in pairs if ch == "content")
    return thinking, content
