"""Speculative decoding: guess a few tokens cheaply, check them in one batch of the model.

A drafter proposes the tokens it expects next; the decode loop (`engine.llama.llama`)
decodes the pending token and the draft together, with logits at every position, then
samples each position with the request's own sampler chain and keeps the draft while the
sampled token equals the drafted one. The first mismatch is itself the next token (it was
sampled from the right logits) and the KV cache drops the rest of the draft.

How many tokens to draft is measured, not fixed (`DraftPolicy`): drafting happens where it
pays on this machine and this text, and not where it does not.

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
START_DRAFT = 4  # the first draft's length, before anything is measured
EXPLORE = 16  # with drafting not paying, still draft one token every this many steps
ALPHA = 0.1  # the weight of a new measurement in the running averages


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
                return list(history[found + 1 : found + 1 + limit])
        return []

    def _extend(self, history: Sequence[int], stop: int) -> None:
        index, sizes = self._index, self._sizes
        for i in range(self._indexed, stop):
            for n in sizes:
                if i + 1 >= n:
                    index[tuple(history[i + 1 - n : i + 1])] = i
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
class DraftPolicy:
    """How many tokens to draft next: the length with the most expected tokens per second.

    Drafting pays only when checking k more positions costs less than the tokens it is
    expected to save, and that depends on the machine (on a busy CPU a batch costs nearly
    as much per position as single decodes; on a GPU or a memory-bound model it is almost
    free) and on the text (how often drafts are right). So both are measured as it runs:
    the time of a one-token decode, the extra time per additional batch position, and the
    chance that a draft token is accepted given the ones before it were. A draft of k
    tokens is expected to yield 1 + a + a^2 + ... + a^k tokens in (single + k * extra)
    seconds; k = 0 (no draft) wins unless some k beats one token per single decode. Every
    EXPLORE-th step drafts one token anyway, so a changed machine or text is noticed. A
    draft model's own decodes are timed with the batch, so they count as its cost.
    """

    single_s: float = 0.0  # EMA seconds of a one-token decode
    extra_s: float | None = None  # EMA seconds per additional batch position
    accept: float = 0.6  # EMA chance a draft token is accepted (a prior until measured)
    steps: int = 0
    fixed: int | None = None  # always draft this many (tests, experiments)

    def length(self, most: int) -> int:
        """Tokens to draft now (0: decode one token), at most `most`."""
        self.steps += 1
        if most <= 0:
            return 0
        if self.fixed is not None:
            return min(most, self.fixed)
        if self.single_s <= 0.0:
            return 0  # measure a one-token decode first
        if self.extra_s is None:
            return min(most, START_DRAFT)  # then a batch
        best_k, best_rate = 0, 1.0 / self.single_s
        expected, p = 1.0, 1.0
        for k in range(1, min(most, MAX_DRAFT) + 1):
            p *= self.accept
            expected += p
            rate = expected / (self.single_s + k * self.extra_s)
            if rate > best_rate:
                best_k, best_rate = k, rate
        if best_k == 0 and self.steps % EXPLORE == 0:
            return 1
        return best_k

    def observe_decode(self, n_tokens: int, seconds: float) -> None:
        """A decode of `n_tokens` positions took `seconds`."""
        if n_tokens == 1:
            self.single_s = seconds if self.single_s <= 0.0 else _ema(self.single_s, seconds)
        elif self.single_s > 0.0:
            extra = max(0.0, (seconds - self.single_s) / (n_tokens - 1))
            self.extra_s = extra if self.extra_s is None else _ema(self.extra_s, extra)

    def observe_draft(self, drafted: int, accepted: int) -> None:
        """Of `drafted` tokens the first `accepted` were right (the one after them, if any, wrong)."""
        tried = min(accepted + 1, drafted)
        if tried > 0:
            self.accept = _ema(self.accept, accepted / tried, weight=min(1.0, ALPHA * tried))


def _ema(old: float, new: float, weight: float = 0.0) -> float:
    w = weight or ALPHA
    return old + w * (new - old)
