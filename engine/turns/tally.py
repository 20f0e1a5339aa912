"""Adding up the model requests of one turn (or one structured run) into `TurnStats`."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from engine.backends.base import StreamInfo
from engine.events import TurnStats


@dataclass
class Tally:
    """Counts across rounds in `sum` (its timings filled by `stats`); `first_piece` is when the
    turn's first piece arrived."""

    started: float = field(default_factory=time.perf_counter)
    first_piece: float | None = None
    attempts: int = 0
    sum: TurnStats = field(default_factory=TurnStats)

    @property
    def finish_reason(self) -> str:
        return self.sum.finish_reason

    def mark_piece(self) -> None:
        if self.first_piece is None:
            self.first_piece = time.perf_counter()

    def add(self, info: StreamInfo, pieces: int, stripped: int) -> None:
        """Fold in one finished (or failed) model request; the last request's receipt is the kept reply's."""
        was = self.sum
        self.sum = replace(
            was,
            tokens=was.tokens + (info.completion_tokens or pieces),
            prompt_tokens=info.prompt_tokens,
            cached_tokens=info.cached_tokens,
            context_size=info.n_ctx,
            retries=was.retries + info.retries,
            finish_reason=info.finish_reason,
            scaffold_stripped=was.scaffold_stripped + stripped,
            drafted=was.drafted + info.drafted,
            accepted=was.accepted + info.accepted,
            receipt=dict(info.receipt) if info.receipt else was.receipt,
        )

    def stats(self) -> TurnStats:
        now = time.perf_counter()
        first = self.first_piece or now
        gen_s, tokens = now - first, self.sum.tokens
        return replace(
            self.sum,
            ttft_ms=round((first - self.started) * 1000, 1),
            tokens_per_s=round((tokens - 1) / gen_s, 2) if tokens > 1 and gen_s > 0 else 0.0,
            total_ms=round((now - self.started) * 1000, 1),
            attempts=self.attempts,
            context_used=self.sum.prompt_tokens + tokens,
        )
