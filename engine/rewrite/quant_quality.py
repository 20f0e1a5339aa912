"""How much a requantized model differs from its source, and how much faster it runs.

Quality is measured as llama.cpp's `perplexity --kl-divergence` does: over a fixed text (the
Apache License 2.0, shipped beside this module, about 2,400 tokens with SmolLM2's vocabulary),
both models' next-token distributions at every position are compared: mean KL divergence
(source ‖ copy), how often their most likely tokens agree, and the ratio of their perplexities.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# isort: off
import engine.llama.llama_first  # noqa: F401  # pyright: ignore[reportUnusedImport]  (llama.cpp before numpy)
import numpy as np
import numpy.typing as npt
# isort: on

from engine.errors import EngineError
from engine.llama import llama_log

TEXT_FILE = Path(__file__).with_name("quality_text.txt")
CHUNK = 512  # tokens per evaluation window, as llama-perplexity's default context
MIN_TOP1, MAX_PPL_RATIO = 0.95, 1.03  # the bar a copy must clear to replace its source

Floats = npt.NDArray[np.float64]


class UnloadableModel(EngineError):
    """llama.cpp refused to load a file being measured (no tensors, a broken header, ...)."""


@dataclass(frozen=True, slots=True)
class Quality:
    mean_kl: float
    top1_agreement: float
    ppl_ratio: float
    tokens: int

    def passes(self) -> bool:
        return self.top1_agreement >= MIN_TOP1 and self.ppl_ratio <= MAX_PPL_RATIO

    def to_json(self) -> dict[str, Any]:
        return {
            "mean_kl": round(self.mean_kl, 5),
            "top1_agreement": round(self.top1_agreement, 4),
            "ppl_ratio": round(self.ppl_ratio, 4),
            "tokens": self.tokens,
            "passes": self.passes(),
        }


@dataclass(frozen=True, slots=True)
class Speed:
    pp_tps: float  # prompt reading, tokens/s
    tg_tps: float  # decoding, tokens/s


def _open(path: Path, threads: int, *, logits_all: bool) -> Any:
    from llama_cpp import Llama

    from engine.llama.cpu import ensure_backends

    llama_log.install()
    ensure_backends()  # a build with run-time CPU variants has no backend until one is loaded
    try:
        return Llama(
            str(path),
            n_ctx=CHUNK,
            n_batch=CHUNK,
            n_threads=threads,
            n_gpu_layers=0,
            logits_all=logits_all,
            verbose=False,
        )
    except ValueError as exc:  # llama-cpp-python's "Failed to load model from file": one line, not a traceback
        raise UnloadableModel(f"llama.cpp cannot load {path.name}") from exc  # its reason is in the log


def text_tokens(model: Any) -> list[int]:
    return list(model.tokenize(TEXT_FILE.read_bytes(), add_bos=False))


def _log_softmax(logits: Floats) -> Floats:
    shifted = logits - logits.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def _chunk_logprobs(model: Any, chunk: list[int]) -> Floats:
    model.reset()
    model.eval(chunk)
    return _log_softmax(np.asarray(model.scores[: len(chunk) - 1], dtype=np.float64))


def compare(source: Path, copy: Path, threads: int, max_tokens: int | None = None) -> Quality:
    """The copy's next-token distributions against the source's over the fixed text (or its start)."""
    return compare_each(source, [copy], threads, max_tokens)[0]


class _Sums:
    """One copy's running totals over the text."""

    def __init__(self) -> None:
        self.kl = self.top1 = self.nll_ref = self.nll_new = 0.0

    def add(self, p: Floats, q: Floats, targets: npt.NDArray[np.int64]) -> None:
        rows = np.arange(len(targets))
        self.kl += float((np.exp(p) * (p - q)).sum())
        self.top1 += float((p.argmax(axis=1) == q.argmax(axis=1)).sum())
        self.nll_ref -= float(p[rows, targets].sum())
        self.nll_new -= float(q[rows, targets].sum())

    def quality(self, n: int) -> Quality:
        return Quality(self.kl / n, self.top1 / n, float(np.exp((self.nll_new - self.nll_ref) / n)), n)


def compare_each(source: Path, copies: list[Path], threads: int, max_tokens: int | None = None) -> list[Quality]:
    """`compare` for several copies of one source: the source's distributions are computed once
    per window and each copy is measured against them, one window at a time (two models' logits
    in memory, as for one copy)."""
    ref = _open(source, threads, logits_all=True)
    opened: list[Any] = []
    try:
        opened.extend(_open(copy, threads, logits_all=True) for copy in copies)
        tokens = text_tokens(ref)[:max_tokens]
        sums = [_Sums() for _ in opened]
        n = 0
        for start in range(0, len(tokens) - 1, CHUNK):
            chunk = [ref.token_bos(), *tokens[start : start + CHUNK - 1]]
            p, targets = _chunk_logprobs(ref, chunk), np.asarray(chunk[1:], dtype=np.int64)
            for model, total in zip(opened, sums, strict=True):
                total.add(p, _chunk_logprobs(model, chunk), targets)
            n += len(targets)
    finally:
        ref.close()
        for model in opened:
            model.close()
    return [total.quality(n) for total in sums]


def measure_speed(path: Path, threads: int, *, n_prompt: int = 256, n_gen: int = 32, rounds: int = 2) -> Speed:
    """Prompt and decode speed, best of `rounds`, as llama-bench's pp/tg tests (CPU only)."""
    model = _open(path, threads, logits_all=False)
    try:
        tokens = (text_tokens(model) * 2)[: n_prompt + n_gen]
        pp = tg = 0.0
        for _ in range(rounds):
            model.reset()
            start = time.perf_counter()
            model.eval(tokens[:n_prompt])
            mid = time.perf_counter()
            for token in tokens[n_prompt:]:
                model.eval([token])
            end = time.perf_counter()
            pp, tg = max(pp, n_prompt / (mid - start)), max(tg, n_gen / (end - mid))
    finally:
        model.close()
    return Speed(pp, tg)
