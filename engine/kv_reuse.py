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
from typing import Any

log = logging.getLogger("engine.llama")

MIN_REUSE = 64  # a kept span shorter than this is not worth a shift


def reuse_shifted(llm: Any, tokens: list[int]) -> int:
    """Shift the cache so `tokens` extends what it holds; returns the tokens saved (0: none)."""
    n = int(llm.n_tokens)
    if n == 0:
        return 0
    cached = [int(t) for t in llm.input_ids[:n]]
    a = _common_prefix(cached, tokens)
    if a >= len(tokens) - MIN_REUSE or a == n:
        return 0
    b, k = find_span(cached, tokens, a)
    if k < MIN_REUSE or not _can_shift(llm):
        return 0
    ctx = llm._ctx  # pyright: ignore[reportPrivateUsage]  # llama-cpp-python keeps its context here
    if not ctx.kv_cache_seq_rm(-1, a, b):
        return 0
    ctx.kv_cache_seq_shift(0, b, n, a - b)  # sequence 0: the only one llama-cpp-python uses
    kept = n - b
    llm.input_ids[a:a + kept] = cached[b:n]
    llm.n_tokens = a + kept
    log.debug("KV cache: dropped positions %d..%d, shifted %d tokens", a, b, kept)
    return min(k, kept)


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def find_span(cached: list[int], tokens: list[int], a: int) -> tuple[int, int]:
    """The first cached position after `a` where `tokens[a:]` continues for MIN_REUSE tokens, and how far."""
    probe = tokens[a:a + MIN_REUSE]
    if len(probe) < MIN_REUSE:
        return 0, 0
    first = probe[0]
    for b in range(a + 1, len(cached) - MIN_REUSE + 1):
        if cached[b] == first and cached[b:b + MIN_REUSE] == probe:
            k = MIN_REUSE
            while b + k < len(cached) and a + k < len(tokens) and cached[b + k] == tokens[a + k]:
                k += 1
            return b, k
    return 0, 0


def _can_shift(llm: Any) -> bool:
    import llama_cpp as lc

    memory = getattr(getattr(llm, "_ctx", None), "memory", None)
    return memory is not None and bool(lc.llama_memory_can_shift(memory))
