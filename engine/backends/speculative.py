"""Speculative decoding: guess a few tokens cheaply, check them in one batch of the model.

A drafter proposes the tokens it expects next; the decode loop (`engine.backends.llama`)
decodes the pending token and the draft together, with logits at every position, then
samples each position with the request's own sampler chain and keeps the draft while the
sampled token equals the drafted one. The first mismatch is itself the next token (it was
sampled from the right logits) and the KV cache drops the rest of the draft.

Every token the reply gets is therefore sampled by the request's chain from logits that
condition on exactly the reply so far: greedy output is the same token for token, and a
sampled reply keeps the target distribution. This is the standard rejection scheme with a
point-mass draft (the draft is one token, not a distribution): accept the drafted token d
with probability p(d), else sample from p with d removed, which is what "sample, then
compare" does. Grammar and penalties see exactly the emitted tokens (the chain accepts
only what it sampled), and a seeded reply draws one random number per emitted token, so
the same seed gives the same reply with or without drafting.

Two drafters:

- `PromptLookup` (on by default): the longest recent n-gram match of the reply's tail in
  everything before it (prompt included), and what followed it there. No second model;
  it pays when the reply repeats its input (code edits, quoting, documents).
- `DraftModel`: a small model with the same vocabulary decodes greedily ahead of the target.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

MAX_NGRAM = 4  # longest tail n-gram looked up
MIN_NGRAM = 2  # shortest: a single-token match is right too rarely to pay for its batch
MAX_DRAFT = 16  # most tokens verified in one batch
START_DRAFT = 4


class Drafter(Protocol):
    """Proposes up to `limit` tokens to follow `history` (the prompt and the reply so far)."""

    def draft(self, history: Sequence[int], limit: int) -> list[int]: ...

    def close(self) -> None: ...


class PromptLookup:
    """Drafts by n-gram lookup: the tail of `history` found earlier in it, and what came next.

    The index maps every n-gram (MIN_NGRAM..MAX_NGRAM tokens) to where it last ended, and
    grows with the history, so each call costs the new tokens only. Build one per request.
    """

    def __init__(self, max_ngram: int = MAX_NGRAM, min_ngram: int = MIN_NGRAM) -> None:
        self._sizes = range(max_ngram, min_ngram - 1, -1)  # longest first
        self._index: dict[tuple[int, ...], int] = {}
        self._indexed = 0  # n-grams ending before this position are in the index

    def draft(self, history: Sequence[int], limit: int) -> list[int]:
        end = len(history) - 1
        self._extend(history, end)  # the tail itself stays out: a match must come before it
        index = self._index
        for n in self._sizes:
            if n > end:
                continue
            found = index.get(tuple(history[-n:]))
            if found is not None:
                return list(history[found + 1:found + 1 + limit])
        return []

    def _extend(self, history: Sequence[int], stop: int) -> None:
        index, sizes = self._index, self._sizes
        for i in range(self._indexed, stop):
            for n in sizes:
                if i + 1 >= n:
                    index[tuple(history[i + 1 - n:i + 1])] = i
        self._indexed = max(self._indexed, stop)

    def close(self) -> None:
        self._index.clear()


class Chained:
    """The first drafter that has a guess: prompt lookup first (free), then a draft model."""

    def __init__(self, *drafters: Drafter) -> None:
        self._drafters = drafters

    def draft(self, history: Sequence[int], limit: int) -> list[int]:
        for drafter in self._drafters:
            found = drafter.draft(history, limit)
            if found:
                return found
        return []

    def close(self) -> None:
        for drafter in self._drafters:
            drafter.close()


@dataclass(slots=True)
class DraftLength:
    """How many tokens to draft next: more after a fully accepted draft, fewer after a miss.

    A rejected draft token costs a batch position for nothing; a long run of accepted ones
    saves a decode each. Grows by 2 on a full accept, drops to what was accepted plus one.
    """

    tokens: int = START_DRAFT
    most: int = MAX_DRAFT

    def update(self, drafted: int, accepted: int) -> None:
        if accepted == drafted:
            self.tokens = min(self.most, self.tokens + 2)
        else:
            self.tokens = max(1, accepted + 1)
