"""Default sampling for a model that has no saved settings: its own recommendations, then ours.

A GGUF file may carry its author's recommended sampling (`general.sampling.*`, written by
llama.cpp's converter from the model's generation config). Those become the model's
defaults. The built-in SmolLM2-135M has none, and with no repetition penalty and no reply
cap it repeats one sentence until stopped, so it also gets a mild penalty and a cap.
Saved per-model settings override all of this (`models.library.settings`).
"""

from __future__ import annotations

import logging
from pathlib import Path

from models.errors import EmberError
from models.gguf.header import read_header

log = logging.getLogger(__name__)

# GGUF key → ModelSettings field.
SAMPLING_KEYS: dict[str, str] = {
    "general.sampling.temp": "temperature",
    "general.sampling.top_k": "top_k",
    "general.sampling.top_p": "top_p",
    "general.sampling.min_p": "min_p",
    "general.sampling.penalty_repeat": "repeat_penalty",
}
# The built-in model without them loops; 1.15 stops that without garbling its short answers,
# and 1,024 tokens bound a reply that still runs away (a page of text; Stop works sooner).
BUILTIN_DEFAULTS: dict[str, object] = {"repeat_penalty": 1.15, "max_tokens": 1024}


def recommended_values(path: Path, *, builtin: bool = False) -> dict[str, object]:
    """ModelSettings fields to default to for the file at `path` (empty when it recommends nothing)."""
    values: dict[str, object] = dict(BUILTIN_DEFAULTS) if builtin else {}
    try:
        header = read_header(path, keep_tokens=False)  # the keys may come after the vocabulary
    except (EmberError, OSError) as exc:
        log.debug("no recommended sampling for %s: %s", path.name, exc)
        return values
    for key, field in SAMPLING_KEYS.items():
        value = header.kv.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            values[field] = int(value) if field == "top_k" else float(value)
    return values
