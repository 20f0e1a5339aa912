"""A slow-format GGUF rewritten into the fastest format this CPU has kernels for, if quality holds.

For each candidate format (`requantize.candidates_for`): write it, compare its next-token
distributions with the source's (`quant_quality.compare`), and time prompt reading and decoding
beside the source's. The winner is the candidate with the fastest prompt reading among those
that pass the quality bar (top-1 agreement ≥ 0.95, perplexity up ≤ 3 %) and read prompts faster
than the source; the others are deleted. No winner means no copy, and the report says why.

Each candidate is written and measured under a temporary name (`….gguf.unchecked`, which no
library scan lists as a model); only the winner is renamed to its final name, so a run killed
midway leaves no unchecked copy where a model is expected.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.rewrite import quant_quality, requantize
from engine.rewrite.quant_quality import Quality, Speed

Progress = Callable[[str], None]


@dataclass(slots=True)
class Outcome:
    source: Path
    source_speed: Speed
    chosen: str | None = None
    path: Path | None = None
    quality: dict[str, Quality] = field(default_factory=dict[str, Quality])
    speed: dict[str, Speed] = field(default_factory=dict[str, Speed])
    reason: str = ""

    def ratios(self, fmt: str) -> tuple[float, float]:
        """(prompt, decode) speed of `fmt` over the source's."""
        s = self.speed[fmt]
        return s.pp_tps / self.source_speed.pp_tps, s.tg_tps / self.source_speed.tg_tps

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "format": self.chosen,
            "reason": self.reason,
            "source_pp_tps": round(self.source_speed.pp_tps, 1),
            "source_tg_tps": round(self.source_speed.tg_tps, 1),
            "candidates": {},
        }
        for fmt, q in self.quality.items():
            entry = q.to_json()
            if fmt in self.speed:
                pp, tg = self.ratios(fmt)
                entry.update(pp_ratio=round(pp, 3), tg_ratio=round(tg, 3))
            out["candidates"][fmt] = entry
        return out

    def summary(self) -> str:
        lines = [
            f"{fmt}: top-1 agreement {q.top1_agreement:.3f}, perplexity x{q.ppl_ratio:.3f}, "
            f"mean KL {q.mean_kl:.4f} over {q.tokens:,} tokens" + self._speed_text(fmt)
            for fmt, q in self.quality.items()
        ]
        return "\n".join([*lines, self.reason])

    def _speed_text(self, fmt: str) -> str:
        if fmt not in self.speed:
            return ""
        pp, tg = self.ratios(fmt)
        return f"; prompt x{pp:.2f}, decode x{tg:.2f}"


def make_fast_copy(
    source: Path,
    target_for: Callable[[str], Path],
    candidates: tuple[str, ...],
    threads: int,
    say: Progress,
    max_tokens: int | None = None,
) -> Outcome:
    """Try each candidate; keep the fastest that passes (at `target_for(fmt)`), delete the rest.

    `max_tokens` compares over the fixed text's start only (the test suite's short run).
    """
    say(f"timing {source.name}")
    outcome = Outcome(source, quant_quality.measure_speed(source, threads))
    try:
        for fmt in candidates:
            _try(outcome, fmt, target_for(fmt), threads, say, max_tokens)
        _choose(outcome, target_for)
    finally:  # the winner is renamed already; every other candidate goes, also on an error
        for fmt in candidates:
            with contextlib.suppress(OSError):
                unchecked(target_for(fmt)).unlink()
    return outcome


def unchecked(target: Path) -> Path:
    """Where a candidate lives until it has won: not a `.gguf` name, so never listed or loaded as a model."""
    return target.with_name(target.name + ".unchecked")


def _try(outcome: Outcome, fmt: str, final: Path, threads: int, say: Progress, max_tokens: int | None) -> None:
    target = unchecked(final)
    say(f"writing {fmt}")
    requantize.requantize(outcome.source, target, fmt, threads)
    say(f"comparing {fmt} with {outcome.source.name} over the fixed text")
    quality = quant_quality.compare(outcome.source, target, threads, max_tokens)
    outcome.quality[fmt] = quality
    say(f"timing {fmt}")  # also when it fails: the report says what the quality would have bought
    outcome.speed[fmt] = quant_quality.measure_speed(target, threads)


def _choose(outcome: Outcome, target_for: Callable[[str], Path]) -> None:
    passing = [f for f in outcome.speed if outcome.quality[f].passes()]
    faster = [f for f in passing if outcome.ratios(f)[0] > 1.0]
    if faster:
        best = max(faster, key=lambda f: outcome.speed[f].pp_tps)
        outcome.chosen, outcome.path = best, target_for(best)
        os.link(unchecked(outcome.path), outcome.path)  # checked now: its final name (never over a file there)
        pp, tg = outcome.ratios(best)
        outcome.reason = f"{best} kept: same quality, prompt x{pp:.2f}, decode x{tg:.2f}"
    elif passing:
        outcome.reason = "no copy kept: the formats that keep quality read prompts no faster here"
    else:
        outcome.reason = "no copy kept: every faster format loses quality (top-1 < 0.95 or perplexity > +3 %)"
