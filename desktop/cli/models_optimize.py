"""`ember models optimize PATH`: a faster copy of a slow-format GGUF, beside it, with its quality report.

The work is `engine.rewrite.optimize_file`; this prints its progress and verdict. A file
already in a fast format is refused in one line (exit 2); a copy that would lose quality is not
kept, and the report says so (exit 1).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from desktop.cli.common import EXIT_OK, fail
from engine.api.errors import EmberError, EngineError

EXIT_NO_COPY = 1


def optimize(path: Path, *, as_json: bool, threads: int | None = None, quality_tokens: int | None = None) -> int:
    from engine.api.machine import default_threads
    from engine.api.models import optimize as make_copy

    path = Path(os.path.abspath(path.expanduser()))
    if not path.is_file():
        return fail(f"{path}: no such file")
    try:
        outcome = make_copy(path, threads or default_threads(), _say, quality_tokens)
    except (EngineError, EmberError, OSError) as exc:
        return fail(f"models optimize: {path.name}: {exc}")
    if as_json:
        data = {**outcome.to_json(), "path": str(outcome.path) if outcome.path else None}
        sys.stdout.write(json.dumps(data, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(outcome.summary() + "\n")
        if outcome.path is not None:
            sys.stdout.write(f"written: {outcome.path}\n")
    return EXIT_OK if outcome.path is not None else EXIT_NO_COPY


def _say(message: str) -> None:
    sys.stderr.write(f"ember models optimize: {message}…\n")
    sys.stderr.flush()
