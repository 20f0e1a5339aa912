"""`ember models catalogue [--json]` and the speed line of `ember models PATH`.

The catalogue in the order the window's Get models page shows it: each entry's best file on
this machine, its fit and its predicted speeds (`models.library.speed`). The prediction needs
this machine's profile (`engine.llama.machine_profile`); when none is cached it is measured
here first, in a few seconds, and the command says so on stderr.
"""

from __future__ import annotations

import sys
from pathlib import Path

from desktop.cli.common import EXIT_OK, fail
from desktop.cli.table import format_table
from desktop.core import get_models
from desktop.core.get_models import cached_profile
from engine.api.errors import EmberError, EngineError
from engine.api.library import shipped_catalogue
from engine.api.machine import MachineProfile, Prediction, Suggestion, predict_meta, ranked
from engine.api.models import ModelMetadata, format_bytes, useful_tps
from engine.api.text import cell, strict_dumps

_COLUMNS = ("MODEL", "FILE", "FIT", "DECODE", "PROMPT", "FIRST WORD", "SPEED HERE")


def profile_or_measure(threads: int | None = None) -> MachineProfile | None:
    """The cached profile, or one measured now (saying so); None when it cannot be measured."""
    from engine.api import machine as machine_profile

    profile = cached_profile()
    if profile is not None:
        return profile
    sys.stderr.write("ember: measuring this machine's speed once, on the built-in model (a few seconds)…\n")
    sys.stderr.flush()
    try:
        return machine_profile.measure(threads or machine_profile.default_threads())
    except (EngineError, EmberError, OSError) as exc:
        sys.stderr.write(f"ember: no speed predictions: {exc}\n")
        return None


def catalogue(*, as_json: bool) -> int:
    try:
        entries = shipped_catalogue()
    except EmberError as exc:
        return fail(f"models catalogue: {exc}")
    profile = profile_or_measure()
    bar = useful_tps()
    suggestions = ranked(entries, get_models.measure_free_memory(), profile=profile, useful_tps=bar)
    if as_json:
        sys.stdout.write(strict_dumps([_entry_json(s, bar) for s in suggestions], indent=2, ensure_ascii=False) + "\n")
    else:
        print(format_table([_row(s) for s in suggestions], _COLUMNS))
    return EXIT_OK


def _entry_json(s: Suggestion, bar: float) -> dict[str, object]:
    p = s.prediction
    return {
        "key": s.entry.key,
        "name": s.entry.name,
        "parameters": s.entry.parameters,
        "quality": s.entry.quality,
        "thinks": s.entry.thinks,
        "file": s.file.name,
        "quant": s.file.quant,
        "size": s.file.size,
        "fit": s.verdict.fit.value,
        "fits": s.verdict.fits,
        "reason": s.verdict.reason,
        "predicted": p.to_json() if p is not None else None,
        "speed_words": p.words() if p is not None else None,
        "useful": (not s.slow) if p is not None else None,
        "useful_tokens_per_s": bar,
    }


def _row(s: Suggestion) -> tuple[str, ...]:
    p = s.prediction
    decode = f"{p.decode_tps:.1f} tok/s" if p else "-"
    prompt = f"{p.prompt_tps:.0f} tok/s" if p else "-"
    first = f"{p.first_word_s:.0f} s" if p and p.first_word_s is not None else "-"
    file = f"{s.file.quant} · {format_bytes(s.file.size)}"
    return (cell(s.entry.name), file, s.verdict.fit.value, decode, prompt, first, p.words() if p else "-")


# --- `ember models PATH` -------------------------------------------------------------------


def file_prediction(meta: ModelMetadata, profile: MachineProfile | None) -> Prediction | None:
    """The prediction for a file here (on the GPU's profile when it fits the GPU whole); real
    use's measured decode speed replaces the estimate."""
    from engine.api import machine as machine_profile

    if profile is None or meta.parameters <= 0:
        return None
    if profile.gpu is not None and _fits_gpu(meta):
        profile = profile.gpu
    thinks = "<think>" in (meta.chat_template or "")
    measured = machine_profile.measured_decode(Path(meta.path), meta.file_size)
    return predict_meta(profile, meta, thinks=thinks, measured_decode_tps=measured)


def _fits_gpu(meta: ModelMetadata) -> bool:
    """Asks llama.cpp for the GPU's free memory: only with a GPU profile."""
    from engine.api import machine

    return machine.fits_gpu_whole(meta, get_models.measure_free_memory())  # tests replace it
