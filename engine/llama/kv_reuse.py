"""Reusing the KV cache when a conversation's window moves (llama.cpp's "cache reuse").

When the context policy drops turns from the middle, the new prompt is the old prompt with
a span cut out: ``cached[:a] + cached[b:b+k] + new``. llama-cpp-python's own prefix match
would keep only ``cached[:a]`` and evaluate everything after it again (most of the context).
`reuse_shifted` instead removes ``cached[a:b]`` from the KV cache and shifts the kept span
left by ``b - a`` positions, as llama.cpp's server does with ``--cache-reuse``, so only the
new tail is evaluated. The kept span's keys were computed with the dropped turns in view;
that is the standard context-shift approximation, and the prompt itself is unchanged.

Only for models whose memory can shift positions (`llama_memory_can_shift`); otherwise, or
when nothing long enough matches, it does nothing and the prompt is evaluated as before.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

log = logging.getLogger("engine.llama")

MIN_REUSE = 64  # a kept span shorter than this is not worth a shift


class ShiftableCache(Protocol):
    """What `reuse_shifted` needs of a KV cache record (`llama_decode.KvCache`)."""

    tokens: list[int]

    def can_shift(self) -> bool: ...

    def drop_span(self, start: int, end: int) -> bool: ...


def reuse_shifted(cache: ShiftableCache, tokens: Sequence[int]) -> int:
    """Shift the cache so `tokens` extends what it holds; returns the tokens saved (0: none)."""
    cached = cache.tokens
    n = len(cached)
    if n == 0:
        return 0
    a = common_prefix(cached, tokens)
    if a >= len(tokens) - MIN_REUSE or a == n:
        return 0
    b, k = find_span(cached, tokens, a)
    if k < MIN_REUSE or not cache.can_shift() or not cache.drop_span(a, b):
        return 0
    log.debug("KV cache: dropped positions %d..%d, shifted %d tokens", a, b, n - b)
    return min(k, n - b)


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def find_span(cached: Sequence[int], tokens: Sequence[int], a: int) -> tuple[int, int]:
    """The first cached position after `a` where `tokens[a:]` continues for MIN_REUSE tokens, and how far."""
    probe = list(tokens[a : a + MIN_REUSE])
    if len(probe) < MIN_REUSE:
        return 0, 0
    first = probe[0]
    for b in range(a + 1, len(cached) - MIN_REUSE + 1):
        if cached[b] == first and list(cached[b : b + MIN_REUSE]) == probe:
            k = MIN_REUSE
            while b + k < len(cached) and a + k < len(tokens) and cached[b + k] == tokens[a + k]:
                k += 1
            return b, k
    return 0, 0
