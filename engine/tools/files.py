"""The file tools' gate: paths the model names, resolved only inside granted folders.

A path is always relative to a granted folder (with several grants its first part names
the folder). Absolute paths, `..` parts, and symbolic links anywhere on the way are
refused, so nothing outside the grants is reachable; only regular files are read, and
only their first `max_bytes`.

The path is opened one part at a time, each relative to the descriptor of the folder
before it, with `O_NOFOLLOW` (`openat` style): checking a path and then opening it by
name would let a folder swapped for a symlink in between lead outside the grant. Every
descriptor is closed on every path out, and errors name the relative path only.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Generator, Iterable
from pathlib import Path, PurePosixPath, PureWindowsPath

from engine.tools.registry import ToolError

MAX_READ_BYTES = 64 * 1024
MAX_LIST_ENTRIES = 500


class FolderGrants:
    """The folders one conversation may read, by their (resolved) paths."""

    def __init__(self, folders: Iterable[str | Path] = ()) -> None:
        self.roots: list[Path] = []
        for folder in folders:
            self.grant(folder)

    def grant(self, folder: str | Path) -> Path:
        root = Path(folder).expanduser().resolve()
        if not root.is_dir():
            raise ToolError(f"{folder} is not a folder")
        if root not in self.roots:
            self.roots.append(root)
        return root

    def __bool__(self) -> bool:
        return bool(self.roots)

    def locate(self, path: str) -> tuple[Path, list[str]]:
        """The granted folder `path` is in and its parts below it; ToolError for anything that could escape."""
        if not self.roots:
            raise ToolError("no folder was granted to this conversation")
        text = path.strip().replace("\\", "/")
        if PurePosixPath(text).is_absolute() or PureWindowsPath(path.strip()).drive or text.startswith("~"):
            raise ToolError("use a path relative to a granted folder, not an absolute one")
        parts = [p for p in PurePosixPath(text).parts if p not in ("", ".")]
        if ".." in parts:
            raise ToolError("'..' is not allowed in paths")
        if "\0" in text:
            raise ToolError(f"{_shown(parts)} does not exist")
        return self._root_for(parts)

    def _root_for(self, parts: list[str]) -> tuple[Path, list[str]]:
        if len(self.roots) == 1:
            return self.roots[0], parts
        if not parts:
            raise ToolError("several folders are granted; start the path with one of: " + self.names())
        for root in self.roots:
            if root.name == parts[0]:
                return root, parts[1:]
        raise ToolError(f"{parts[0]!r} is not a granted folder; granted: {self.names()}")

    def names(self) -> str:
        return ", ".join(r.name for r in self.roots)


def _shown(parts: list[str], limit: int = 200) -> str:
    text = "/".join(parts) or "."
    return text if len(text) <= limit else text[: limit - 1] + "…"


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_BY_DESCRIPTOR = os.open in os.supports_dir_fd and bool(_NOFOLLOW and _DIRECTORY)


@contextlib.contextmanager
def _opened(grants: FolderGrants, path: str, *, folder: bool) -> Generator[int]:
    """A descriptor for the granted `path` (a folder when `folder`, else a regular file), closed after."""
    root, parts = grants.locate(path)
    fd = _open_below(root, parts, folder=folder)
    try:
        info = os.fstat(fd)
        if folder and not stat.S_ISDIR(info.st_mode):
            raise ToolError(f"{_shown(parts)} is not a folder")
        if not folder and stat.S_ISDIR(info.st_mode):
            raise ToolError(f"{_shown(parts)} is a folder; use list_files to see what it holds")
        if not folder and not stat.S_ISREG(info.st_mode):
            raise ToolError(f"{_shown(parts)} is not a regular file")
        yield fd
    finally:
        os.close(fd)


def _open_below(root: Path, parts: list[str], *, folder: bool) -> int:
    if not _BY_DESCRIPTOR:  # Windows: no dir_fd; check each part, then open by name (files only)
        return _open_by_name(root, parts)
    try:  # the grant was resolved: a link in its place now is a swap, not the folder granted
        fd = os.open(root, os.O_RDONLY | _DIRECTORY | _NOFOLLOW)
    except OSError as exc:
        raise ToolError(f"the granted folder {root.name} cannot be opened: {exc.strerror or exc}") from None
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            flags = os.O_RDONLY | _NOFOLLOW | _NONBLOCK | (_DIRECTORY if not last or folder else 0)
            try:
                below = os.open(part, flags, dir_fd=fd)
            except OSError as exc:
                raise _open_error(exc, parts[: i + 1], fd, part) from None
            except ValueError:  # a name the file system cannot encode (a lone surrogate)
                raise ToolError(f"{_shown(parts[: i + 1])} does not exist") from None
            os.close(fd)
            fd = below
        return fd
    except BaseException:
        os.close(fd)
        raise


def _open_error(exc: OSError, parts: list[str], parent_fd: int, part: str) -> ToolError:
    shown = _shown(parts)
    if exc.errno == errno.ENAMETOOLONG:
        return ToolError("the path is too long")
    if exc.errno == errno.ENOENT:
        return ToolError(f"{shown} does not exist")
    if exc.errno in (errno.ELOOP, errno.EMLINK) or _is_link(parent_fd, part):
        return ToolError(f"{shown} is a symbolic link; links are not followed")
    if exc.errno == errno.ENOTDIR:
        return ToolError(f"{shown} is not a folder")
    return ToolError(f"cannot open {shown}: {exc.strerror or exc}")


def _is_link(parent_fd: int, part: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(part, dir_fd=parent_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _checked_path(root: Path, parts: list[str]) -> Path:
    """Windows' way (no dir_fd): each part checked for a link, then used by name."""
    current = root
    for i, part in enumerate(parts):
        current = current / part
        try:
            if current.is_symlink():
                raise ToolError(f"{_shown(parts[: i + 1])} is a symbolic link; links are not followed")
            if not current.exists():
                raise ToolError(f"{_shown(parts[: i + 1])} does not exist")
        except (OSError, ValueError) as exc:
            raise ToolError(f"cannot open {_shown(parts)}: {exc}") from None
    return current


def _open_by_name(root: Path, parts: list[str]) -> int:
    target = _checked_path(root, parts)
    if target.is_dir():
        raise ToolError(f"{_shown(parts)} is a folder; use list_files to see what it holds")
    try:
        return os.open(target, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_BINARY", 0))
    except OSError as exc:
        raise ToolError(f"cannot open {_shown(parts)}: {exc.strerror or exc}") from None


def list_folder(grants: FolderGrants, path: str) -> str:
    if len(grants.roots) > 1 and not [p for p in PurePosixPath(path.strip() or ".").parts if p not in (".", "/")]:
        return "\n".join(f"{r.name}/" for r in grants.roots)
    if not _BY_DESCRIPTOR:
        root, parts = grants.locate(path)
        folder = _checked_path(root, parts)
        if not folder.is_dir():
            raise ToolError(f"{_shown(parts)} is not a folder")
        with os.scandir(folder) as scan:
            return _listing(sorted(scan, key=lambda e: e.name.lower()))
    with _opened(grants, path, folder=True) as fd, os.scandir(fd) as scan:
        return _listing(sorted(scan, key=lambda e: e.name.lower()))


def _listing(entries: list[os.DirEntry[str]]) -> str:
    lines = [_entry_line(e) for e in entries[:MAX_LIST_ENTRIES]]
    if len(entries) > MAX_LIST_ENTRIES:
        lines.append(f"[{len(entries) - MAX_LIST_ENTRIES} more entries not shown]")
    return "\n".join(lines) if lines else "(the folder is empty)"


def _entry_line(entry: os.DirEntry[str]) -> str:
    if entry.is_symlink():
        return f"{entry.name} (link, not followed)"
    if entry.is_dir():
        return f"{entry.name}/"
    try:
        return f"{entry.name} ({entry.stat().st_size} bytes)"
    except OSError:
        return entry.name


def read_text_file(grants: FolderGrants, path: str, max_bytes: int = MAX_READ_BYTES) -> str:
    with _opened(grants, path, folder=False) as fd:
        data = _read_at_most(fd, max_bytes + 1)
    shown = _shown(grants.locate(path)[1])
    if b"\0" in data:
        raise ToolError(f"{shown} is not a text file")
    text = data[:max_bytes].decode("utf-8", errors="replace")
    if len(data) > max_bytes:
        text += f"\n[file cut: only the first {max_bytes} bytes were read]"
    return text


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    while limit > 0:
        try:
            chunk = os.read(fd, min(limit, 1 << 16))
        except OSError as exc:
            raise ToolError(f"the file cannot be read: {exc.strerror or exc}") from None
        if not chunk:
            break
        chunks.append(chunk)
        limit -= len(chunk)
    return b"".join(chunks)
