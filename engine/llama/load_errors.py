"""One readable line for every way a model file can fail to load."""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path

from engine.errors import ModelLoadError
from models.errors import GGUFError
from models.gguf.diagnose import explain_load_failure, metadata_problem
from models.gguf.meta import ModelMetadata, read_metadata

GGUF_MAGIC = b"GGUF"


def precheck_model_file(path: Path) -> None:
    """Refuse files llama.cpp would reject, before it spends time (or crashes) on them."""
    name = path.name or str(path)
    problem = file_kind_problem(path)
    if problem:
        raise ModelLoadError(f"{name}: {problem}")
    if not os.access(path, os.R_OK):
        raise ModelLoadError(f"{name}: the file cannot be read (permission denied)")
    try:
        with path.open("rb") as f:
            head = f.read(4)
    except OSError as exc:
        raise ModelLoadError(f"{name}: the file cannot be read ({exc.strerror or exc})") from exc
    if not head:
        raise ModelLoadError(f"{name}: the file is empty (0 bytes)")
    if head != GGUF_MAGIC:
        raise ModelLoadError(f"{name}: not a GGUF model file (it does not start with 'GGUF')")


def file_kind_problem(path: Path) -> str | None:
    """Why `path` is not a regular file Ember may open, or None. Never opens it.

    A FIFO, socket or device named `model.gguf` would block `open()` forever (or stream
    without end), so only regular files (or links to them) pass.
    """
    try:
        st = path.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "the path is a symbolic link loop"
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return f"the file does not exist ({path})"
        return f"the file cannot be read ({exc.strerror or exc})"
    except ValueError as exc:  # e.g. a NUL byte in the path
        return f"the path cannot be used ({exc})"
    if stat.S_ISDIR(st.st_mode):
        return "this is a folder, not a GGUF model file"
    if not stat.S_ISREG(st.st_mode):
        return f"this is {_kind(st.st_mode)}, not a regular file; only model files can be opened"
    return None


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a special file"


_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"invalid magic"), "not a GGUF model file"),
    (
        re.compile(r"not within the file bounds|corrupted or incomplete|unexpected(ly)? end of file|failed to read"),
        "the file is truncated or corrupted (an incomplete download?)",
    ),
    (
        re.compile(r"unknown model architecture: '([^']*)'"),
        "unsupported model architecture '{0}' (this llama.cpp build does not know it)",
    ),
    (
        re.compile(r"bad_alloc|out of memory|failed to allocate|cudaMalloc failed"),
        "not enough memory for the model and a {n_ctx}-token context; try a smaller context",
    ),
    (re.compile(r"unsupported|version \d+ .*not supported", re.I), "the GGUF version or format is not supported"),
)


def explain_llama_failure(path: Path, exc: BaseException, log_lines: list[str], n_ctx: int) -> str:
    """Map llama.cpp's logged reason (the exception alone says little) to one line."""
    text = "\n".join(log_lines[-40:])
    for pattern, reason in _PATTERNS:
        m = pattern.search(text)
        if m:
            return reason.format(*m.groups(), n_ctx=n_ctx)
    header_reason = _header_reason(path)
    if header_reason:
        return header_reason
    if "Failed to create llama_context" in str(exc):
        return f"not enough memory for a {n_ctx}-token context; try a smaller context"
    last_error = next((ln for ln in reversed(log_lines) if "error" in ln.lower()), "")
    detail = last_error.strip() or str(exc)
    return f"llama.cpp could not load it: {detail}"


def read_model_header(path: Path) -> ModelMetadata:
    """Read and judge the header before llama.cpp sees the file (truncation, arch, shards…)."""
    try:
        meta = read_metadata(path)
    except GGUFError as exc:
        raise ModelLoadError(f"{path.name}: {exc}") from exc
    problem = metadata_problem(meta)
    if problem:
        raise ModelLoadError(f"{path.name}: {problem}")
    return meta


def _header_reason(path: Path) -> str | None:
    try:
        return explain_load_failure(path)
    except Exception:  # explaining a failure must never fail itself
        return None
