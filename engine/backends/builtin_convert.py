"""Converting the built-in model once, in the background, into the fastest format that keeps quality.

The window calls `start_in_background()` once it is up. When no verdict about the shipped file
stands (`models.library.fast_builtin.needs_conversion`), it starts a low-priority child process
that measures the candidates (`fast_copy.make_fast_copy`), keeps the winner in the data folder
and writes the record. The shipped file serves meanwhile, so the first start never waits; the
next model load picks the copy up (`default_model_path`). One conversion at a time: a lock file
holds the child's process id.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from engine.child_env import function_child
from models.errors import EmberError
from models.library import fast_builtin
from models.library.default_model import shipped_model_path
from models.library.paths import EmberPaths, ember_paths

log = logging.getLogger(__name__)

LOCK = "converting.lock"
SWITCH = "EMBER_CONVERT_BUILTIN"  # "0" turns the conversion off (the test suite's windows)


def start_in_background(paths: EmberPaths | None = None) -> subprocess.Popen[bytes] | None:
    """Start the conversion child if one is needed and none runs; the child, or None."""
    paths = paths or ember_paths()
    try:
        shipped = shipped_model_path()
        off = os.environ.get(SWITCH) == "0" or os.environ.get("EMBER_DEFAULT_MODEL")
        if off or not fast_builtin.needs_conversion(shipped, paths):
            return None
        lock = fast_builtin.folder(paths) / LOCK
        if _held(lock):
            return None
        child = function_child("engine.backends.builtin_convert:run_child")  # same environment, same data folder
        proc = subprocess.Popen(
            child.argv,
            env=child.env,
            cwd=child.cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except (OSError, EmberError) as exc:
        log.warning("built-in model conversion not started: %s", exc)
        return None
    with contextlib.suppress(OSError):
        lock.parent.mkdir(parents=True, exist_ok=True)
        lock.write_text(str(proc.pid))
    log.info("converting the built-in model in the background (process %d)", proc.pid)
    return proc


def _held(lock: Path) -> bool:
    """True while the process named in the lock file runs."""
    try:
        pid = int(lock.read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return False
    return True


def run_child() -> int:
    """The child's work, at the lowest CPU priority: convert, record, release the lock."""
    with contextlib.suppress(OSError, AttributeError):
        os.nice(19)
    paths = ember_paths()
    try:
        convert(shipped_model_path(), paths)
    except (OSError, EmberError) as exc:
        sys.stderr.write(f"ember: built-in model conversion failed: {exc}\n")
        return 1
    finally:
        with contextlib.suppress(OSError):
            (fast_builtin.folder(paths) / LOCK).unlink()
    return 0


def convert(
    shipped: Path, paths: EmberPaths, *, threads: int | None = None, max_tokens: int | None = None
) -> dict[str, Any]:
    """Measure, keep the winner beside the record, and write the record; the record."""
    from engine.backends import fast_copy, requantize
    from engine.backends.cpu_threads import default_threads
    from models.gguf.meta import read_metadata
    from models.library.digests import file_sha256

    folder = fast_builtin.folder(paths)
    folder.mkdir(parents=True, exist_ok=True)
    stem = shipped.name.removesuffix(".gguf").rsplit(".", 1)[0]
    candidates = requantize.candidates_for(read_metadata(shipped).quantization)
    outcome = fast_copy.make_fast_copy(
        shipped,
        lambda fmt: folder / f"{stem}.{fmt}.gguf",
        candidates,
        threads or default_threads(),
        lambda m: log.info("conversion: %s", m),
        max_tokens,
    )
    record: dict[str, Any] = {
        "source": fast_builtin.source_stamp(shipped),
        **outcome.to_json(),
        "verdict": fast_builtin.CONVERTED if outcome.path else fast_builtin.KEPT,
    }
    if outcome.path is not None:
        record.update(file=outcome.path.name, sha256=file_sha256(outcome.path, paths))
    fast_builtin.write_record(record, paths)
    return record
