"""Where a downloaded model file came from: `model-origins.json` in the data folder.

    {"/home/u/.local/share/ember/models/bartowski/X-GGUF/X-Q4_K_M.gguf":
       {"repo": "bartowski/X-GGUF", "path": "X-Q4_K_M.gguf", "revision": "<commit sha>",
        "sha256": "…", "size": 4683073952, "downloaded_at": "2026-12-03T12:00:00Z",
        "endpoint": "https://huggingface.co"}}

Written by the download (engine/hub) before the files get their final names, read by the
reply receipt (the model's source beside its SHA-256), `ember models` and `ember models rm`,
which removes only files listed here (or in Ember's models folder).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import cast

from models.library.jsonstore import load_json_object, write_json_atomic
from models.library.paths import EmberPaths, ember_paths

ORIGINS_FILE = "model-origins.json"
_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class Origin:
    repo: str
    path: str  # inside the repository
    revision: str  # the commit sha
    sha256: str
    size: int
    downloaded_at: str  # ISO 8601, UTC
    endpoint: str

    @property
    def source(self) -> str:
        """`repo@revision12/path`: short enough for a receipt line, exact enough to fetch again."""
        return f"{self.repo}@{self.revision[:12]}/{self.path}"

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Origin | None:
        try:
            text = {k: data[k] for k in ("repo", "path", "revision", "sha256", "downloaded_at", "endpoint")}
            size = data["size"]
        except KeyError:
            return None
        if not all(isinstance(v, str) for v in text.values()) or not isinstance(size, int):
            return None
        return cls(size=size, **cast(dict[str, str], text))


def _file(paths: EmberPaths | None) -> Path:
    return (paths or ember_paths()).data_dir / ORIGINS_FILE


def _key(path: Path) -> str:
    return os.path.normcase(os.path.abspath(path))


def record_origins(entries: Mapping[Path, Origin], paths: EmberPaths | None = None) -> None:
    with _lock:
        data = load_json_object(_file(paths), {})
        data.update({_key(p): o.to_json() for p, o in entries.items()})
        write_json_atomic(_file(paths), data)


def forget_origin(path: Path, paths: EmberPaths | None = None) -> None:
    with _lock:
        data = load_json_object(_file(paths), {})
        if data.pop(_key(path), None) is not None:
            write_json_atomic(_file(paths), data)


def origins(paths: EmberPaths | None = None) -> dict[Path, Origin]:
    """Every recorded download, the file's path → its origin (whether or not the file is still there)."""
    out: dict[Path, Origin] = {}
    for name, entry in load_json_object(_file(paths), {}).items():
        if isinstance(entry, dict):
            origin = Origin.from_json(cast(dict[str, object], entry))
            if origin is not None:
                out[Path(name)] = origin
    return out


def origin_of(path: Path, paths: EmberPaths | None = None) -> Origin | None:
    return origins(paths).get(Path(_key(path)))
