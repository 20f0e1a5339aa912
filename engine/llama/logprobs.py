"""Log probabilities of sampled tokens, read from llama.cpp's logits (`Request.logprobs`).

The model's own distribution: a log-softmax over the raw logits of the position the token was
sampled from, before penalties, grammar or temperature (what OpenAI's `logprobs` report), with
the `top` most likely tokens beside it. Read right after sampling, while the batch's logits are
still the context's.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import llama_cpp.llama_cpp as ll
import numpy as np

from engine.events import TokenLogprob

MAX_TOP_LOGPROBS = 20  # OpenAI's bound


class LogprobReader:
    """Records each sampled token's `TokenLogprob`, in sampling order, for the decode loop to take."""

    def __init__(self, ctx: Any, n_vocab: int, top: int, piece: Callable[[int], bytes]) -> None:
        self._ctx = ctx
        self._n_vocab = n_vocab
        self._top = max(0, min(top, MAX_TOP_LOGPROBS))
        self._piece = piece
        self._pending: deque[TokenLogprob] = deque()

    def record(self, index: int, token: int) -> None:
        """`token` was sampled from batch position `index`: keep its log probability."""
        pointer = ll.llama_get_logits_ith(self._ctx, index)
        logits = np.ctypeslib.as_array(pointer, shape=(self._n_vocab,)).astype(np.float64)
        peak = float(logits.max())
        norm = peak + float(np.log(np.exp(logits - peak).sum()))
        top: tuple[TokenLogprob, ...] = ()
        if self._top:
            best = np.argpartition(-logits, self._top - 1)[: self._top]
            best = best[np.argsort(-logits[best], kind="stable")]
            top = tuple(self._entry(int(t), float(logits[t]) - norm) for t in best)
        self._pending.append(self._entry(token, float(logits[token]) - norm, top))

    def take(self) -> TokenLogprob:
        """The oldest recorded token's entry (tokens are taken in the order they were sampled)."""
        return self._pending.popleft()

    def _entry(self, token: int, logprob: float, top: tuple[TokenLogprob, ...] = ()) -> TokenLogprob:
        data = self._piece(token)
        return TokenLogprob(data.decode("utf-8", "replace"), tuple(data), logprob, top)
