"""A model file's SHA-256, computed once per file and cached (`model-digests.json` in the data folder).

The cache is keyed by the file's resolved path, size and modification time, so a file that
changes is hashed again and one that does not is never read twice. Hashing reads the whole
file (a few seconds for a multi-gigabyte model), so `DigestJob` runs it on a thread of its
own as soon as a model loads, and a receipt waits for it only if the first reply beats it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import cast

from models.library.jsonstore import load_json_object, write_json_atomic
from models.library.paths import EmberPaths, ember_paths

log = logging.getLogger(__name__)

DIGESTS_FILE = "model-digests.json"
_CHUNK = 4 << 20
_lock = threading.Lock()  # one writer of the cache file per process


def _cache_file(paths: EmberPaths | None) -> Path:
    return (paths or ember_paths()).data_dir / DIGESTS_FILE


def _key(path: Path) -> tuple[str, str]:
    st = path.stat()
    return str(path.resolve()), f"{st.st_size}:{st.st_mtime_ns}"


def cached_sha256(path: Path, paths: EmberPaths | None = None) -> str | None:
    """The cached digest of `path` if the file is unchanged since it was hashed, else None."""
    name, stamp = _key(path)
    entry = load_json_object(_cache_file(paths), {}).get(name)
    if isinstance(entry, dict):
        d = cast(dict[str, object], entry)
        if d.get("stamp") == stamp and isinstance(d.get("sha256"), str):
            return cast(str, d["sha256"])
    return None


def file_sha256(path: Path, paths: EmberPaths | None = None) -> str:
    """The SHA-256 of `path` (hex), from the cache when the file is unchanged."""
    found = cached_sha256(path, paths)
    if found is not None:
        return found
    name, stamp = _key(path)
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(_CHUNK):
            digest.update(block)
    sha = digest.hexdigest()
    _store(name, stamp, sha, paths)
    return sha


def _store(name: str, stamp: str, sha: str, paths: EmberPaths | None) -> None:
    with _lock:
        cache = load_json_object(_cache_file(paths), {})
        cache[name] = {"stamp": stamp, "sha256": sha}
        try:
            write_json_atomic(_cache_file(paths), cache)
        except OSError as exc:  # the digest is still right; it is only hashed again next time
            log.warning("could not save the model digest cache: %s", exc)


def remember_sha256(path: Path, sha256: str, paths: EmberPaths | None = None) -> None:
    """Cache a digest computed elsewhere (a download hashes as it writes), so it is never read again."""
    name, stamp = _key(path)
    _store(name, stamp, sha256, paths)


def known_files(sha256: str, paths: EmberPaths | None = None) -> Iterator[Path]:
    """Files the cache knows by `sha256` that still exist (unchanged or not: the caller checks)."""
    for name, entry in load_json_object(_cache_file(paths), {}).items():
        if isinstance(entry, dict) and cast(dict[str, object], entry).get("sha256") == sha256 and os.path.isfile(name):
            yield Path(name)


class DigestJob:
    """A file's digest computed on a background thread; `result()` waits for it."""

    def __init__(self, path: Path, paths: EmberPaths | None = None) -> None:
        self._future: Future[str] = Future()
        self._path, self._paths = path, paths or ember_paths()
        threading.Thread(target=self._run, name="model-sha256", daemon=True).start()

    def _run(self) -> None:
        try:
            self._future.set_result(file_sha256(self._path, self._paths))
        except Exception as exc:
            log.warning("could not hash %s: %s", self._path.name, exc)
            self._future.set_exception(exc)

    def result(self, timeout: float | None = None) -> str | None:
        """The digest, or None when the file could not be read."""
        try:
            return self._future.result(timeout)
        except Exception:
            return None
