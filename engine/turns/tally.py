"""Adding up the model requests of one turn (or one structured run) into `TurnStats`."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from engine.backends.base import StreamInfo
from engine.events import FinishReason, TurnStats


@dataclass
class Tally:
    """Counts across rounds; `first_piece` is when the turn's first piece arrived."""

    started: float = field(default_factory=time.perf_counter)
    first_piece: float | None = None
    tokens: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    n_ctx: int = 0
    retries: int = 0
    stripped: int = 0
    attempts: int = 0
    drafted: int = 0
    accepted: int = 0
    finish_reason: str = FinishReason.STOP
    receipt: dict[str, Any] | None = None  # the last request's: its reply is the one kept

    def mark_piece(self) -> None:
        if self.first_piece is None:
            self.first_piece = time.perf_counter()

    def add(self, info: StreamInfo, pieces: int, stripped: int) -> None:
        """Fold in one finished (or failed) model request."""
        self.tokens += info.completion_tokens or pieces
        self.prompt_tokens = info.prompt_tokens
        self.cached_tokens = info.cached_tokens
        self.n_ctx = info.n_ctx
        self.retries += info.retries
        self.finish_reason = info.finish_reason
        self.stripped += stripped
        self.drafted += info.drafted
        self.accepted += info.accepted
        if info.receipt:
            self.receipt = dict(info.receipt)

    def stats(self) -> TurnStats:
        now = time.perf_counter()
        first = self.first_piece or now
        gen_s = now - first
        tps = (self.tokens - 1) / gen_s if self.tokens > 1 and gen_s > 0 else 0.0
        return TurnStats(
            tokens=self.tokens,
            prompt_tokens=self.prompt_tokens,
            cached_tokens=self.cached_tokens,
            ttft_ms=round((first - self.started) * 1000, 1),
            tokens_per_s=round(tps, 2),
            total_ms=round((now - self.started) * 1000, 1),
            retries=self.retries,
            scaffold_stripped=self.stripped,
            attempts=self.attempts,
            finish_reason=self.finish_reason,
            context_used=self.prompt_tokens + self.tokens,
            context_size=self.n_ctx,
            drafted=self.drafted,
            accepted=self.accepted,
            receipt=self.receipt,
        )
