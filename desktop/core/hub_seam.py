"""The seam between the "Get models" page and the Hub (`engine.api.downloads`).

The page needs a client (host, search, list of a repository's GGUF files), a download
function, the models folder, and the zero-egress gate (are downloads allowed; allow them).
`HubServices` carries them; `default_services()` builds the real ones. The files, repositories
and progress the page reads are the engine's own dataclasses (`HubFile`, `HubRepo`, `Progress`);
only the client and the download function are protocols, so tests can pass fakes
(tests/hub_fakes.py) or the real client against the loopback fake Hub.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # engine.api.downloads brings httpx, which the window must not load before its first paint
    from engine.api.downloads import HubFile, HubRepo
    from engine.api.values import CancelToken


class HubClientLike(Protocol):
    @property
    def host(self) -> str: ...
    def search(self, text: str, limit: int = 30) -> Sequence[HubRepo]: ...
    def list_gguf(self, repo: str, revision: str | None = None) -> Sequence[HubFile]: ...


class DownloadFn(Protocol):
    def __call__(
        self,
        files: Sequence[Any],
        dest_dir: Path,
        *,
        client: Any,
        progress: Callable[[Any], None] | None = None,
        cancel: CancelToken | None = None,
    ) -> list[Path]: ...


@dataclass(frozen=True, slots=True)
class HubServices:
    """Everything the page needs from the Hub side; `allowed`/`allow` are the zero-egress gate."""

    client: HubClientLike
    download: DownloadFn
    models_dir: Path
    allowed: Callable[[], bool]
    allow: Callable[[], None]


def default_services() -> HubServices:
    """The real services from `engine.hub`. Building the client touches no network; only a
    search, a listing or a download does (each behind the zero-egress gate). Imported here, not at
    the top: engine.hub brings httpx, which the window must not load before its first paint."""
    from engine.api.downloads import HubClient, allow_downloads, default_models_dir, download, downloads_allowed
    from engine.api.program import ember_paths

    paths = ember_paths()
    client = HubClient()
    return HubServices(
        client=client,
        download=download,
        models_dir=default_models_dir(paths),
        allowed=lambda: downloads_allowed(paths, client),
        allow=lambda: allow_downloads(paths, client),
    )
