"""One readable line, and what kind of failure it is, for every way a model file can fail to load."""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path

from engine.errors import ModelLoadError
from models.errors import GGUFError, LoadFailure, one_line
from models.gguf.diagnose import metadata_problem, unknown_architecture
from models.gguf.meta import ModelMetadata, read_metadata

GGUF_MAGIC = b"GGUF"


def precheck_model_file(path: Path) -> None:
    """Refuse files llama.cpp would reject, before it spends time (or crashes) on them.

    A FIFO, socket or device named `model.gguf` would block `open()` forever (or stream
    without end), so only regular files (or links to them) pass; `stat` never opens it.
    """
    name = path.name or str(path)
    try:
        mode = path.stat().st_mode
        if not stat.S_ISREG(mode):
            raise ModelLoadError(*_not_a_file(name, mode))
        if not os.access(path, os.R_OK):
            raise ModelLoadError(f"{name}: the file cannot be read (permission denied)", LoadFailure.DENIED)
        with path.open("rb") as f:
            head = f.read(4)
    except OSError as exc:
        raise ModelLoadError(*_os_problem(name, path, exc)) from exc
    except ValueError as exc:  # e.g. a NUL byte in the path
        raise ModelLoadError(f"{name}: the path cannot be used ({exc})") from exc
    if not head:
        raise ModelLoadError(f"{name}: the file is empty (0 bytes)")
    if head != GGUF_MAGIC:
        raise ModelLoadError(f"{name}: not a GGUF model file (it does not start with 'GGUF')", LoadFailure.NOT_GGUF)


def _os_problem(name: str, path: Path, exc: OSError) -> tuple[str, LoadFailure]:
    kind = LoadFailure.of(exc)
    if kind is LoadFailure.MISSING:
        return f"{name}: the file does not exist ({path})", kind
    if exc.errno == errno.ELOOP:
        return f"{name}: the path is a symbolic link loop", kind
    return f"{name}: the file cannot be read ({exc.strerror or exc})", kind


_NAMES = {stat.S_IFIFO: "a named pipe (FIFO)", stat.S_IFSOCK: "a socket"}  # the rest, on Linux: devices


def _not_a_file(name: str, mode: int) -> tuple[str, LoadFailure]:
    if stat.S_ISDIR(mode):
        return f"{name}: this is a folder, not a GGUF model file", LoadFailure.NOT_GGUF
    kind = _NAMES.get(stat.S_IFMT(mode), "a device")
    return f"{name}: this is {kind}, not a regular file; only model files can be opened", LoadFailure.OTHER


# llama.cpp's logged reason (the exception alone says little) → its kind and Ember's line. First match wins.
_CAUSES: tuple[tuple[re.Pattern[str], LoadFailure, str], ...] = (
    (re.compile(r"invalid magic"), LoadFailure.NOT_GGUF, "not a GGUF model file"),
    (
        re.compile(r"not within the file bounds|corrupted or incomplete|unexpected(ly)? end of file|failed to read"),
        LoadFailure.INCOMPLETE,
        "the file is truncated or corrupted (an incomplete download?)",
    ),
    (
        re.compile(r"unknown model architecture: '([^']*)'"),
        LoadFailure.ARCHITECTURE,
        "unsupported model architecture '{0}' (this llama.cpp build does not know it)",
    ),
    (
        re.compile(r"bad_alloc|out of memory|failed to allocate|cudaMalloc failed"),
        LoadFailure.MEMORY,
        "not enough memory for the model and a {n_ctx}-token context; try a smaller context",
    ),
    (
        re.compile(r"unsupported|version \d+ .*not supported", re.I),
        LoadFailure.OTHER,
        "the GGUF version or format is not supported",
    ),
)
# The kind of a failure told only in llama.cpp's own last error line (or the exception).
_DETAIL_KINDS: tuple[tuple[str, LoadFailure], ...] = (
    (r"wrong shape|check_tensor_dims|tensor .* has wrong", LoadFailure.SHAPES),
    (r"(unknown|unsupported) (model )?architecture", LoadFailure.ARCHITECTURE),
    (r"truncated|incomplete download|unexpected end|tensor data is not within", LoadFailure.INCOMPLETE),
    (r"not a gguf|bad magic|failed to read magic", LoadFailure.NOT_GGUF),
    (r"not enough memory|cannot allocate|mmap failed|std::bad_alloc", LoadFailure.MEMORY),
    (r"no such file|not found|does not exist", LoadFailure.MISSING),
    (r"permission denied", LoadFailure.DENIED),
)


def llama_failure(name: str, path: Path, exc: BaseException, log_lines: list[str], n_ctx: int) -> ModelLoadError:
    """llama.cpp's failure to load `path` as one line (naming `name`) and its kind."""
    text = "\n".join(log_lines[-40:])
    for pattern, kind, reason in _CAUSES:
        if m := pattern.search(text):
            return ModelLoadError(f"{name}: {reason.format(*m.groups(), n_ctx=n_ctx)}", kind)
    try:
        read_model_header(path, name)
    except ModelLoadError as header:  # the header explains it after all
        return header
    except Exception:  # explaining a failure must never fail itself
        pass
    if "Failed to create llama_context" in str(exc):
        return ModelLoadError(
            f"{name}: not enough memory for a {n_ctx}-token context; try a smaller context", LoadFailure.MEMORY
        )
    last_error = next((ln for ln in reversed(log_lines) if "error" in ln.lower()), "")
    detail = one_line(last_error) or str(exc)
    kind = next((kind for pattern, kind in _DETAIL_KINDS if re.search(pattern, detail, re.I)), LoadFailure.OTHER)
    return ModelLoadError(f"{name}: llama.cpp could not load it: {detail}", kind)


def read_model_header(path: Path, name: str = "") -> ModelMetadata:
    """Read and judge the header before llama.cpp sees the file (truncation, arch, shards…);
    a refusal names `name` (the file's name by default)."""
    label = name or path.name
    try:
        meta = read_metadata(path)
    except GGUFError as exc:
        raise ModelLoadError(f"{label}: {exc}", exc.kind) from exc
    problem = metadata_problem(meta)
    if problem:
        kind = LoadFailure.ARCHITECTURE if unknown_architecture(meta) else LoadFailure.OTHER
        raise ModelLoadError(f"{label}: {problem}", kind)
    return meta
