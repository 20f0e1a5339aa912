"""The scaffolding guardrail's cost per piece: `ScaffoldingFilter.feed_piece` on a synthetic stream."""

from __future__ import annotations

import logging
import random
import time

from engine.events import Piece
from engine.reply.scaffolding import DEFAULT_REGISTRY, ScaffoldingFilter

_BENCH_WORDS = (
    "the", "model", "answer", "is", "that", "Paris", "weather", "today", "a < b", "list[0]",
    "and", "we", "can", "see", "it", "works", "\n\n", "code", "value", "with", "<b>bold</b>",
)  # fmt: skip


def _bench_stream(n_bytes: int, rng: random.Random) -> str:
    spans = [p.fixture for p in DEFAULT_REGISTRY if p.end is not None]
    parts: list[str] = []
    size = 0
    while size < n_bytes:
        word = rng.choice(spans) if rng.random() < 0.002 else rng.choice(_BENCH_WORDS)
        parts.append(word + " ")
        size += len(word) + 1
    return "".join(parts)


def _bench_pieces(text: str, rng: random.Random) -> list[Piece]:
    pieces: list[Piece] = []
    i = 0
    while i < len(text):
        n = rng.randint(1, 6)  # token-sized pieces, cut at random points
        pieces.append(Piece(text[i : i + n]))
        i += n
    return pieces


def _time_filter(pieces: list[Piece]) -> float:
    f = ScaffoldingFilter()
    feed = f.feed_piece
    t0 = time.perf_counter()
    for piece in pieces:
        feed(piece)
    f.flush()
    return time.perf_counter() - t0


def bench_filter(n_bytes: int = 1_000_000, seed: int = 0, repeat: int = 3) -> float:
    """Microseconds per piece through `ScaffoldingFilter.feed_piece` on a synthetic stream.

    The stream is mostly prose (with some `<` and `[` look-alikes) and scaffolding from
    several families, split into 1–6 character pieces at random points. The best of
    `repeat` passes is reported, as timeit does: slower passes measure other load.
    """
    rng = random.Random(seed)
    pieces = _bench_pieces(_bench_stream(n_bytes, rng), rng)
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)  # measure the filter, not the log handlers
    try:
        best = min(_time_filter(pieces) for _ in range(max(1, repeat)))
    finally:
        logging.disable(previous)
    return best / len(pieces) * 1e6
