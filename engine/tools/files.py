"""The file tools' gate: paths the model names, resolved only inside granted folders.

A path is always relative to a granted folder (with several grants its first part names
the folder). Absolute paths, `..` parts, and symbolic links anywhere on the way are
refused, so nothing outside the grants is reachable; only regular files are read, and
only their first `max_bytes`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
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

    def resolve(self, path: str) -> Path:
        """The granted location `path` names; ToolError for anything that could escape."""
        if not self.roots:
            raise ToolError("no folder was granted to this conversation")
        text = path.strip().replace("\\", "/")
        if PurePosixPath(text).is_absolute() or PureWindowsPath(path.strip()).drive or text.startswith("~"):
            raise ToolError("use a path relative to a granted folder, not an absolute one")
        parts = [p for p in PurePosixPath(text).parts if p not in ("", ".")]
        if ".." in parts:
            raise ToolError("'..' is not allowed in paths")
        root, parts = self._root_for(parts)
        current = root
        for part in parts:
            current = current / part
            if current.is_symlink():
                raise ToolError(f"{_show(root, current)} is a symbolic link; links are not followed")
        if not current.exists():
            raise ToolError(f"{_show(root, current)} does not exist")
        return current

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


def _show(root: Path, path: Path) -> str:
    relative = path.relative_to(root).as_posix()
    return relative if relative != "." else root.name


def list_folder(grants: FolderGrants, path: str) -> str:
    if len(grants.roots) > 1 and not [p for p in PurePosixPath(path.strip() or ".").parts if p not in (".", "/")]:
        return "\n".join(f"{r.name}/" for r in grants.roots)
    folder = grants.resolve(path)
    if not folder.is_dir():
        raise ToolError(f"{path} is not a folder")
    entries = sorted(os.scandir(folder), key=lambda e: e.name.lower())
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
    target = grants.resolve(path)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(target, flags)
    except OSError as exc:
        raise ToolError(f"cannot open {path}: {exc.strerror or exc}") from exc
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise ToolError(f"{path} is not a regular file")
        data = handle.read(max_bytes + 1)
    if b"\0" in data:
        raise ToolError(f"{path} is not a text file")
    text = data[:max_bytes].decode("utf-8", errors="replace")
    if len(data) > max_bytes:
        text += f"\n[file cut: only the first {max_bytes} bytes were read]"
    return text
