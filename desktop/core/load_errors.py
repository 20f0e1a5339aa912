"""A failed model load in words a user can act on; llama.cpp's own text stays behind "Details".

llama.cpp reports load failures as log lines ("llama_model_load: error loading model:
check_tensor_dims: tensor 'blk.0.attn_q.weight' has wrong shape; expected    576, …").
`load_failure_text` turns the common ones into one plain sentence, says which model is
still answering, and keeps the raw text (with its padding squeezed) for the details.
"""

from __future__ import annotations

import re

# (pattern in the raw text, the sentence a user reads), first match wins.
_CAUSES: tuple[tuple[str, str], ...] = (
    (
        r"wrong shape|check_tensor_dims|tensor .* has wrong",
        "This file's tensor shapes don't match its architecture — the file may be damaged or converted wrongly.",
    ),
    (
        r"unknown (model )?architecture|unsupported (model )?architecture",
        "This file's model architecture isn't supported by this version of llama.cpp.",
    ),
    (
        r"truncated|incomplete download|unexpected end|tensor data is not within",
        "This file is incomplete — the download may have been cut short.",
    ),
    (r"not a gguf|invalid magic|bad magic|failed to read magic", "This isn't a GGUF model file."),
    (
        r"out of memory|not enough memory|failed to allocate|cannot allocate|mmap failed|std::bad_alloc",
        "There isn't enough memory to load this model. Try a smaller file or a shorter context.",
    ),
    (r"no such file|not found|does not exist", "The file is no longer where it was."),
    (r"permission denied", "Ember isn't allowed to read this file."),
)
GENERIC = "llama.cpp could not load this file."


def humane_cause(raw: str) -> str:
    """One sentence for a raw load error (a generic one when it is not recognised)."""
    for pattern, sentence in _CAUSES:
        if re.search(pattern, raw, re.IGNORECASE):
            return sentence
    return GENERIC


def squeeze(raw: str) -> str:
    """The raw text without llama.cpp's column padding ("expected    576,    576" → "expected 576, 576")."""
    return "\n".join(re.sub(r"[ \t]{2,}", " ", line).strip() for line in raw.strip().splitlines())


def load_failure_text(label: str, raw: str, still_using: str | None) -> tuple[str, str]:
    """(the banner's sentence, the details) for `label` failing with `raw`."""
    now = f"Still using {still_using}." if still_using else "No model is loaded yet — choose another one."
    return f"Couldn't load {label}. {humane_cause(raw)} {now}", squeeze(raw)
