"""The seam between the "Get models" page and the Hub client (`engine.hub`), as typed protocols.

The page needs a client (host, search, list of a repository's GGUF files), a download
function, the models folder, and the zero-egress gate (are downloads allowed; allow them).
`HubServices` carries them; `default_services()` builds the real ones from `engine.hub`,
imported lazily (and by name: the package arrives with its own branch), and says in one line
why downloads are unavailable when it cannot. Tests pass fakes (tests/hub_fakes.py).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol


class HubFileLike(Protocol):
    @property
    def repo(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def size(self) -> int: ...
    @property
    def sha256(self) -> str | None: ...
    @property
    def revision(self) -> str: ...


class HubRepoLike(Protocol):
    @property
    def repo(self) -> str: ...
    @property
    def downloads(self) -> int: ...
    @property
    def likes(self) -> int: ...
    @property
    def gated(self) -> bool: ...
    @property
    def gguf_files(self) -> Sequence[HubFileLike] | None: ...


class HubClientLike(Protocol):
    @property
    def host(self) -> str: ...
    def search(self, text: str, limit: int = 30) -> Sequence[HubRepoLike]: ...
    def list_gguf(self, repo: str, revision: str | None = None) -> Sequence[HubFileLike]: ...


class ProgressLike(Protocol):
    @property
    def done(self) -> int: ...
    @property
    def total(self) -> int: ...
    @property
    def bytes_per_s(self) -> float: ...
    @property
    def seconds_left(self) -> float | None: ...
    @property
    def file(self) -> str: ...


class DownloadFn(Protocol):
    def __call__(self, files: Sequence[Any], dest_dir: Path, *, client: Any,
                 progress: Callable[[Any], None] | None = None,
                 cancel: threading.Event | None = None) -> list[Path]: ...


@dataclass(frozen=True, slots=True)
class HubServices:
    """Everything the page needs from the Hub side; `allowed`/`allow` are the zero-egress gate."""

    client: HubClientLike
    download: DownloadFn
    models_dir: Path
    allowed: Callable[[], bool]
    allow: Callable[[], None]


UNAVAILABLE = "Downloads are not available in this build of Ember."


def default_services() -> HubServices | str:
    """The real services from `engine.hub`, or the one-line reason they cannot be had.

    Building the client touches no network; only a search, a listing or a download does.
    """
    try:
        client_mod = importlib.import_module("engine.hub.client")
        download_mod = importlib.import_module("engine.hub.download")
        paths_mod = importlib.import_module("models.library.paths")
    except ImportError:
        return UNAVAILABLE
    paths = paths_mod.ember_paths()
    client = client_mod.HubClient()
    return HubServices(
        client=client,
        download=download_mod.download,
        models_dir=Path(download_mod.default_models_dir(paths)),
        allowed=lambda: bool(download_mod.downloads_allowed(paths, client)),
        allow=lambda: download_mod.allow_downloads(paths, client),
    )
