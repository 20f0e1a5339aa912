"""Default sampling for a model that has no saved settings: its own recommendations, then ours.

A GGUF file may carry its author's recommended sampling (`general.sampling.*`, written by
llama.cpp's converter from the model's generation config). Those become the model's
defaults. Ours follow what the model *is*, read from its header (name family, parameter
count, chat template), never where its file lies: the built-in SmolLM2-135M, a copy of it
and a downloaded SmolLM2 get the same. The small chat models of the families below carry
no recommendations, and with no repetition penalty and no reply cap they repeat one
sentence until stopped, so they get a mild penalty and a cap. Saved per-model settings
override all of this (`models.library.settings`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from models.errors import EmberError
from models.gguf.header import GGUFHeader, MetaValue, read_header

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
SMALL_MODEL_DEFAULTS: dict[str, object] = {"repeat_penalty": 1.15, "max_tokens": 1024}
# The families of the catalogue's models under a billion parameters (SmolLM2 135M/360M,
# SmolVLM 500M, Qwen2.5 0.5B); matched against the header's names and the chat template.
SMALL_FAMILIES = ("smollm", "smolvlm", "qwen2")
SMALL_PARAMETERS = 1_000_000_000
_SIZE_LABEL = re.compile(r"^\s*(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>[KMBT])\s*$", re.IGNORECASE)
_UNITS = {"k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}


@dataclass(frozen=True, slots=True)
class ModelIdentity:
    """What a model is, as far as its defaults go: from the header, never from the file's path."""

    architecture: str
    family: str  # general.basename, else general.name, casefolded; "" when unnamed
    parameters: int | None  # general.size_label, else summed over this file's tensors
    chat_template: str

    @property
    def small_of_a_looping_family(self) -> bool:
        if self.parameters is None or self.parameters >= SMALL_PARAMETERS or not self.chat_template:
            return False
        named = _squash(self.family)
        template = _squash(self.chat_template)  # SmolLM2's template names it ("named SmolLM")
        return any(f in named or f in template for f in SMALL_FAMILIES)


def identity_of(header: GGUFHeader) -> ModelIdentity:
    kv = header.kv
    family = _text(kv, "general.basename") or _text(kv, "general.name")
    return ModelIdentity(
        architecture=_text(kv, "general.architecture"),
        family=family.casefold(),
        parameters=_size_label(_text(kv, "general.size_label")) or _tensor_parameters(header),
        chat_template=_text(kv, "tokenizer.chat_template"),
    )


def recommended_values(path: Path) -> dict[str, object]:
    """ModelSettings fields to default to for the file at `path` (empty when it recommends nothing)."""
    try:
        header = read_header(path, keep_tokens=False)  # the keys may come after the vocabulary
    except (EmberError, OSError) as exc:
        log.debug("no recommended sampling for %s: %s", path.name, exc)
        return {}
    return values_for(header)


def values_for(header: GGUFHeader) -> dict[str, object]:
    """Ours for what the model is, then the file's own recommendations over them."""
    values: dict[str, object] = dict(SMALL_MODEL_DEFAULTS) if identity_of(header).small_of_a_looping_family else {}
    for key, field in SAMPLING_KEYS.items():
        value = header.kv.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            values[field] = int(value) if field == "top_k" else float(value)
    return values


def _text(kv: Mapping[str, MetaValue], key: str) -> str:
    value = kv.get(key)
    return value if isinstance(value, str) else ""


def _squash(text: str) -> str:
    """Letters and digits only, casefolded: "Qwen2.5" and "qwen2_5" read alike."""
    return "".join(c for c in text.casefold() if c.isalnum())


def _size_label(label: str) -> int | None:
    """ "135M" → 135,000,000; None for labels of other shapes ("8x7B", "")."""
    m = _SIZE_LABEL.match(label)
    return int(float(m["n"]) * _UNITS[m["unit"].casefold()]) if m else None


def _tensor_parameters(header: GGUFHeader) -> int | None:
    total = sum(t.n_elements for t in header.tensors)
    return total or None
