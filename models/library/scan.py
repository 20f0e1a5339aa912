"""The model library: the built-in model, Ember's models folder, added folders, recent files.

Library state (added folders, recent files, the last used model, saved remote servers)
lives in `library.json` in the config directory, written atomically. Scanning a folder
is recursive and cheap: only `*.gguf` files whose first four bytes are the GGUF magic
count; split shards (`name-00001-of-00003.gguf`) become one model (the first shard's
path, the sizes summed); vision projectors (`mmproj`) are not chat models and are left out.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import cast

from models.errors import GGUFError
from models.gguf.header import read_header, read_magic
from models.gguf.meta import ModelMetadata, read_metadata, shard_info, shard_paths
from models.gguf.names import is_projector_name
from models.gguf.projector import is_projector_header
from models.library.default_model import DEFAULT_NAME, DefaultModelMissing, default_model_path
from models.library.json_schema import Schema, is_list, is_text, is_url, optional
from models.library.jsonstore import load_json_object, string_keys, write_json_atomic
from models.library.paths import EmberPaths, ember_paths, resolve_model_file

log = logging.getLogger(__name__)

LIBRARY_FILENAME = "library.json"
FORMAT_VERSION = 1
MAX_RECENT = 20


class Source(StrEnum):
    BUILTIN = "builtin"
    MODELS_DIR = "models_dir"
    FOLDER = "folder"
    RECENT = "recent"


@dataclass(frozen=True, slots=True)
class RemoteServer:
    """An OpenAI-compatible server the user saved (llama.cpp server, vLLM, Ollama)."""

    name: str
    base_url: str
    model: str | None = None

    @property
    def key(self) -> str:
        """What identifies this server's model in the state (its name is only a label)."""
        return server_key(self.base_url, self.model)


def server_key(base_url: str, model: str | None) -> str:
    """`model at base_url` (no trailing slash), or the URL alone for the server's default model."""
    url = base_url.strip().rstrip("/")
    return f"{model} at {url}" if model else url


@dataclass(frozen=True, slots=True)
class LibraryState:
    """What the library remembers. The last used model is a file (`last_used`) or a saved
    server (`last_used_server`, its `server_key`), never both."""

    folders: tuple[Path, ...] = ()
    recent: tuple[Path, ...] = ()  # most recent first
    last_used: Path | None = None
    remote_servers: tuple[RemoteServer, ...] = ()
    last_used_server: str | None = None

    def with_folder(self, folder: Path) -> LibraryState:
        folder = _absolute(folder)
        if folder in self.folders:
            return self
        return dataclasses.replace(self, folders=(*self.folders, folder))

    def without_folder(self, folder: Path) -> LibraryState:
        folder = _absolute(folder)
        return dataclasses.replace(self, folders=tuple(f for f in self.folders if f != folder))

    def with_opened(self, model: Path) -> LibraryState:
        """`model` becomes the last used and the first recent file."""
        model = _absolute(model)
        recent = (model, *(p for p in self.recent if p != model))[:MAX_RECENT]
        return dataclasses.replace(self, recent=recent, last_used=model, last_used_server=None)

    def with_server_used(self, server: RemoteServer) -> LibraryState:
        """`server` becomes the last used model (the last used file is forgotten, not the recent list)."""
        return dataclasses.replace(self, last_used=None, last_used_server=server.key)

    def with_default_used(self) -> LibraryState:
        """The built-in model is the last used: nothing to recall."""
        return dataclasses.replace(self, last_used=None, last_used_server=None)

    def saved_server(self, base_url: str, model: str | None) -> RemoteServer | None:
        """The saved server serving `model` at `base_url`, if there is one."""
        key = server_key(base_url, model)
        return next((s for s in self.remote_servers if s.key == key), None)

    @property
    def last_server(self) -> RemoteServer | None:
        """The saved server used last; None when a file was, or when it is no longer saved."""
        if self.last_used_server is None:
            return None
        return next((s for s in self.remote_servers if s.key == self.last_used_server), None)

    def without_recent(self, model: Path) -> LibraryState:
        model = _absolute(model)
        return dataclasses.replace(self, recent=tuple(p for p in self.recent if p != model))

    def with_remote_server(self, server: RemoteServer) -> LibraryState:
        """Add `server`, replacing a saved one of the same name."""
        others = tuple(s for s in self.remote_servers if s.name != server.name)
        return dataclasses.replace(self, remote_servers=(*others, server))

    def without_remote_server(self, name: str) -> LibraryState:
        return dataclasses.replace(self, remote_servers=tuple(s for s in self.remote_servers if s.name != name))

    def to_json(self) -> dict[str, object]:
        return {
            "version": FORMAT_VERSION,
            "folders": [str(f) for f in self.folders],
            "recent": [str(p) for p in self.recent],
            "last_used": str(self.last_used) if self.last_used else None,
            "remote_servers": [dataclasses.asdict(s) for s in self.remote_servers],
            "last_used_server": self.last_used_server,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> LibraryState:
        """State from stored JSON; anything malformed is dropped, never fatal."""
        last, server = data.get("last_used"), data.get("last_used_server")
        last_used = Path(last) if isinstance(last, str) and last else None
        return cls(
            folders=tuple(Path(p) for p in _strings(data.get("folders"))),
            recent=tuple(Path(p) for p in _strings(data.get("recent")))[:MAX_RECENT],
            last_used=last_used,
            remote_servers=tuple(_servers(data.get("remote_servers"))),
            # Older files have no such key; a file and a server both set: the file wins.
            last_used_server=server if isinstance(server, str) and server and last_used is None else None,
        )


def _absolute(p: Path) -> Path:
    return Path(os.path.abspath(p.expanduser()))


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, list):
        yield from (v for v in cast(list[object], value) if isinstance(v, str) and v)


def _servers(value: object) -> Iterator[RemoteServer]:
    if not isinstance(value, list):
        return
    for item in cast(list[object], value):
        if not isinstance(item, dict):
            continue
        d = string_keys(cast(dict[object, object], item))
        name, url, model = d.get("name"), d.get("base_url"), d.get("model")
        if isinstance(name, str) and isinstance(url, str) and name and url:
            if not is_url(url):  # a hand edit such as `http://[fe80::1/v1` would fail every use
                log.warning("%s: ignoring the saved server %r (%r is not a URL)", LIBRARY_FILENAME, name, url[:200])
                continue
            yield RemoteServer(name, url, model if isinstance(model, str) else None)


def library_file(paths: EmberPaths | None = None) -> Path:
    return (paths or ember_paths()).config_dir / LIBRARY_FILENAME


# Lists are kept when some items are bad: `from_json` checks them one by one.
_SCHEMA: Schema = {
    "folders": is_list,
    "recent": is_list,
    "remote_servers": is_list,
    "last_used": optional(is_text),
    "last_used_server": optional(is_text),
}


def load_library_state(paths: EmberPaths | None = None) -> LibraryState:
    return LibraryState.from_json(load_json_object(library_file(paths), LibraryState().to_json(), _SCHEMA))


def save_library_state(state: LibraryState, paths: EmberPaths | None = None) -> None:
    write_json_atomic(library_file(paths), state.to_json())


def note_opened(model: Path, paths: EmberPaths | None = None) -> LibraryState:
    """Record a successfully opened model file (recent list and last used); returns the state."""
    state = load_library_state(paths).with_opened(model)
    save_library_state(state, paths)
    return state


def note_server_used(base_url: str, model: str | None, paths: EmberPaths | None = None) -> LibraryState | None:
    """Record a successfully loaded saved server as the last used model; returns the state.

    A server that is not saved (e.g. one given on the command line) is not recorded: None.
    """
    state = load_library_state(paths)
    server = state.saved_server(base_url, model)
    if server is None:
        return None
    state = state.with_server_used(server)
    save_library_state(state, paths)
    return state


def last_used_model(state: LibraryState | None = None, paths: EmberPaths | None = None) -> tuple[Path, str | None]:
    """The model to open at start and a notice for the user, or None when all is well.

    A last used file that has gone missing falls back to the built-in model, with a notice
    saying so. Raises DefaultModelMissing only when the built-in model is missing too.
    """
    last = (state or load_library_state(paths)).last_used
    if last is not None and last.is_file():
        return last, None
    default = default_model_path()
    if last is None:
        return default, None
    return default, f"The last used model is missing ({last}); opened the built-in model instead."


def last_used_entry(
    state: LibraryState | None = None, paths: EmberPaths | None = None
) -> tuple[Path | RemoteServer, str | None]:
    """Like `last_used_model`, but the last used model may also be a saved server.

    Nothing here contacts the server. One no longer saved falls back to the built-in model,
    with a notice saying so; raises DefaultModelMissing only when that is missing too.
    """
    state = state or load_library_state(paths)
    if state.last_used_server is None:
        return last_used_model(state)
    server = state.last_server
    if server is not None:
        return server, None
    return default_model_path(), (
        f"The last used server is no longer saved ({state.last_used_server}); opened the built-in model instead."
    )


# --- scanning ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ModelFile:
    """A model found on disk: one file, or the first shard of a split model."""

    path: Path
    size_bytes: int  # every shard present
    shard_count: int
    error: str | None = None  # e.g. a missing shard


def _gguf_names(folder: Path) -> Iterator[Path]:
    # Symlinked folders are not followed (a link to a parent would loop); hidden ones skipped.
    for root, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.lower().endswith(".gguf") and not name.startswith("."):
                yield Path(root, name)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _peek_projector(path: Path) -> bool:
    """True when the header says projector; reads only the leading `general.*` keys."""
    try:
        header = read_header(path, keep_tokens=False, stop_before=lambda key: not key.startswith("general."))
    except GGUFError:
        return False  # not ours to judge here; describing the file will report the error
    return is_projector_header(header)


def _group_shards(files: Iterable[Path]) -> list[ModelFile]:
    singles: list[ModelFile] = []
    groups: dict[tuple[Path, str, int], dict[int, Path]] = {}
    for p in files:
        info = shard_info(p)
        if info is None:
            singles.append(ModelFile(p, _size(p), 1))
        else:
            groups.setdefault((p.parent, info[0].lower(), info[2]), {})[info[1]] = p
    return singles + [_shard_group(count, found) for (_, _, count), found in groups.items()]


def _shard_group(count: int, found: dict[int, Path]) -> ModelFile:
    first = found.get(1) or found[min(found)]
    missing = [str(i) for i in range(1, count + 1) if i not in found]
    error = f"missing shard {', '.join(missing)} of {count}" if missing else None
    return ModelFile(first, sum(_size(p) for p in found.values()), count, error)


def scan_folder(folder: Path) -> list[ModelFile]:
    """GGUF chat models under `folder` (recursively), sorted by path."""
    candidates = [p for p in _gguf_names(folder) if not is_projector_name(p.name) and read_magic(p)]
    models = _group_shards(candidates)
    return sorted((m for m in models if not _peek_projector(m.path)), key=lambda m: str(m.path).lower())


def skipped_files(folder: Path) -> list[Path]:
    """Files under `folder` named like models (`*.gguf`, not a projector) that are not GGUF at all.

    `scan_folder` leaves them out; the picker lists them, greyed, with what they are instead.
    """
    return [p for p in _gguf_names(folder) if not is_projector_name(p.name) and not read_magic(p)]


# --- the whole library -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LibraryEntry:
    path: Path
    source: Source
    size_bytes: int
    shard_count: int
    metadata: ModelMetadata | None = None  # None when not read, or unreadable
    error: str | None = None  # why the file cannot be used (missing, truncated, …)

    @property
    def name(self) -> str:
        if self.source is Source.BUILTIN:
            return DEFAULT_NAME  # the GGUF's own name ("Smollm2 135M 8k Lc100K Mix1 Ep2") says little
        return self.metadata.name if self.metadata else self.path.name

    def to_json(self) -> dict[str, object]:
        base: dict[str, object] = self.metadata.to_json() if self.metadata else {"path": str(self.path)}
        base["name"] = self.name
        base.update(source=str(self.source), size_bytes=self.size_bytes, shard_count=self.shard_count)
        base["error"] = self.error
        return base


def _file_entry(path: Path) -> ModelFile:
    shards = shard_paths(path)
    present = [p for p in shards if p.is_file()]
    if not path.is_file():
        return ModelFile(path, 0, len(shards), "no such file")
    missing = len(shards) - len(present)
    error = f"missing {missing} of {len(shards)} shards" if missing else None
    return ModelFile(path, sum(_size(p) for p in present), len(shards), error)


def _candidates(state: LibraryState, paths: EmberPaths) -> Iterator[tuple[Source, ModelFile]]:
    try:
        yield Source.BUILTIN, _file_entry(default_model_path())
    except DefaultModelMissing as exc:
        log.warning("built-in model unavailable: %s", exc)
    for folder, source in ((paths.models_dir, Source.MODELS_DIR), *((f, Source.FOLDER) for f in state.folders)):
        for found in scan_folder(folder):
            yield source, found
    for recent in state.recent:
        yield Source.RECENT, _file_entry(recent)


def _dedupe_key(path: Path) -> str:
    try:
        return os.path.normcase(str(resolve_model_file(path)))
    except (OSError, GGUFError):  # a symlink loop, an unreachable share
        return os.path.normcase(str(path))


def _entry(source: Source, found: ModelFile, read: bool) -> LibraryEntry | None:
    entry = LibraryEntry(found.path, source, found.size_bytes, found.shard_count, error=found.error)
    if not read or found.error:
        return entry
    try:
        meta = read_metadata(found.path)
    except GGUFError as exc:
        return dataclasses.replace(entry, error=exc.reason)
    if meta.is_projector:
        return None
    return dataclasses.replace(entry, metadata=meta)


def library_entries(
    state: LibraryState | None = None, *, paths: EmberPaths | None = None, read: bool = True
) -> list[LibraryEntry]:
    """Every model in the library, the built-in first; each file once (first source wins).

    `read` also reads each header (tens of ms each on big vocabularies): call it off the
    GUI thread. Unreadable files are listed with `error` set, so the user sees why.
    """
    paths = paths or ember_paths()
    state = state or load_library_state(paths)
    seen: set[str] = set()
    entries: list[LibraryEntry] = []
    for source, found in _candidates(state, paths):
        key = _dedupe_key(found.path)
        if key in seen:
            continue
        seen.add(key)
        entry = _entry(source, found, read)
        if entry is not None:
            entries.append(entry)
    return entries
