"""A fake Hub for the "Get models" tests: a client and a download function of our own.

They implement the interface of `engine.hub` (HubClient.host/search/list_gguf, download(files,
dest_dir, *, client, progress, cancel)) over bytes held in memory, so the page's tests run
before, and independently of, the real Hub client. `fake_services` wires them into the page's
`HubServices`. To run the same tests against the real client and the loopback fake Hub, point
`fake_services` at them here (one place).

The download can pause after its first chunk (`FakeDownloader.pause`) so a test sees a
download in progress, and cancels between chunks, keeping its part file: the next download
of the same file resumes from it, reporting the bytes already there first (as `engine.hub`).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from desktop.core.hub_seam import HubServices
from engine.api.downloads import HubFile, HubRepo, Progress
from engine.api.values import CancelToken
from models.errors import EmberError
from models.library.catalogue import CatalogueEntry, parse_entry
from models.library.fit import FreeMemory

REVISION = "0123456789abcdef0123456789abcdef01234567"


def FakeHubFile(repo: str, path: str, size: int, sha256: str | None, revision: str = REVISION) -> HubFile:
    """A file of the fake Hub: the engine's own `HubFile`, at the fake's one revision."""
    return HubFile(repo, path, size, sha256, revision)


FakeHubRepo = HubRepo
FakeProgress = Progress


class FakeDownloadError(EmberError):
    pass


class FakeDownloadCancelled(FakeDownloadError):
    pass


class FakeHubClient:
    """Repositories as {repo: {file path: bytes}}; records every call it gets."""

    def __init__(
        self,
        repos: Mapping[str, Mapping[str, bytes]],
        *,
        host: str = "hub.test",
        downloads: Mapping[str, int] | None = None,
    ) -> None:
        self.repos = {r: dict(files) for r, files in repos.items()}
        self._host = host
        self._downloads = dict(downloads or {})
        self.calls: list[str] = []

    @property
    def host(self) -> str:
        return self._host

    def _files(self, repo: str) -> list[HubFile]:
        return [
            FakeHubFile(repo, path, len(data), hashlib.sha256(data).hexdigest())
            for path, data in self.repos[repo].items()
            if path.endswith(".gguf")
        ]

    def search(self, text: str, limit: int = 30) -> list[HubRepo]:
        self.calls.append(f"search {text}")
        words = text.casefold().split()
        found = [r for r in self.repos if all(w in r.casefold() for w in words)]
        return [FakeHubRepo(r, self._downloads.get(r, 10), 1, False, None) for r in found[:limit]]

    def list_gguf(self, repo: str, revision: str | None = None) -> list[HubFile]:
        self.calls.append(f"list {repo}")
        if repo not in self.repos:
            raise FakeDownloadError(f"{repo} is not on {self.host} (404)")
        return self._files(repo)

    def blob(self, file: HubFile) -> bytes:
        return self.repos[file.repo][file.path]


@dataclass
class FakeDownloader:
    """The download function: writes each file in chunks into `dest_dir`, reporting progress."""

    chunk: int = 64 * 1024
    pause: bool = False  # wait for `resume` after the first chunk
    reached: threading.Event = field(default_factory=threading.Event)
    resume: threading.Event = field(default_factory=threading.Event)
    fetched: list[str] = field(default_factory=list)

    def __call__(
        self,
        files: Sequence[HubFile],
        dest_dir: Path,
        *,
        client: FakeHubClient,
        progress: Callable[[Progress], None] | None = None,
        cancel: CancelToken | None = None,
    ) -> list[Path]:
        dest_dir.mkdir(parents=True, exist_ok=True)
        total = sum(f.size for f in files)
        done = 0
        out: list[Path] = []
        for f in files:
            data = client.blob(f)
            final = dest_dir.joinpath(*f.repo.split("/"), *Path(f.path).parts)  # as engine.hub lands it
            part = final.with_name(final.name + ".part")
            final.parent.mkdir(parents=True, exist_ok=True)
            with part.open("ab") as fh:
                have = fh.tell()  # a part kept by a cancel: resumed
                done += have
                if have and progress is not None:
                    progress(FakeProgress(done, total, 0.0, None, f.path))
                for start in range(have, len(data), self.chunk):
                    if cancel is not None and cancel.cancelled:
                        raise FakeDownloadCancelled("download cancelled; the part is kept")
                    fh.write(data[start : start + self.chunk])
                    done += len(data[start : start + self.chunk])
                    if progress is not None:
                        progress(FakeProgress(done, total, 1_000_000.0, (total - done) / 1e6, f.path))
                    if self.pause and not self.reached.is_set():
                        self.reached.set()
                        assert self.resume.wait(10), "the test never resumed the download"
            part.replace(final)
            self.fetched.append(f.path)
            out.append(final)
        return out


@dataclass
class Gate:
    """The zero-egress gate: downloads allowed or not, and how often allowing was asked for."""

    allowed: bool = False
    allows: int = 0

    def allow(self) -> None:
        self.allows += 1
        self.allowed = True


def fake_services(
    client: FakeHubClient, downloader: FakeDownloader, models_dir: Path, gate: Gate | None = None
) -> HubServices:
    gate = gate or Gate()
    return HubServices(
        client=client, download=downloader, models_dir=models_dir, allowed=lambda: gate.allowed, allow=gate.allow
    )


# --- a small catalogue served by the fake Hub ------------------------------------------------

GB = 1_000_000_000
TINY_REPO = "test/tiny-chat-GGUF"
TINY_FILE = "tiny-chat-Q4_K_M.gguf"
TINY_TARGET = Path(*TINY_REPO.split("/"), TINY_FILE)  # where a download of it lands in the models folder


def catalogue_entry(key: str, repo: str, name: str, size: int, quality: int, **extra: Any) -> CatalogueEntry:
    raw = {
        "key": key,
        "name": key.replace("-", " ").title(),
        "repo": repo,
        "parameters": "1B",
        "parameters_b": 1.0,
        "quality": quality,
        "licence": "apache-2.0",
        "licence_url": "https://www.apache.org/licenses/LICENSE-2.0",
        "context_length": 4096,
        "thinks": False,
        "tool_calls": None,
        "architecture": {"layers": 2, "kv_heads": 2, "head_dim": 64, "embedding": 128},
        "files": [{"quant": "Q4_K_M", "name": name, "size": size}],
        "checked_against": ["a test"],
        **extra,
    }
    return parse_entry(raw, 0)


def small_catalogue(tiny_size: int) -> list[CatalogueEntry]:
    """A tiny model the fake Hub serves, a 3 GB one it does not, and one too big for any machine."""
    return [
        catalogue_entry("tiny-chat", TINY_REPO, TINY_FILE, tiny_size, quality=2),
        catalogue_entry("middle-model", "test/middle-GGUF", "middle-Q4_K_M.gguf", 3 * GB, quality=6),
        catalogue_entry("huge-model", "test/huge-GGUF", "huge-Q4_K_M.gguf", 500 * GB, quality=10),
    ]


def small_hub(tiny_bytes: bytes) -> FakeHubClient:
    return FakeHubClient(
        {
            TINY_REPO: {TINY_FILE: tiny_bytes, "README.md": b"# tiny"},
            "someone/tiny-chat-extra-GGUF": {"extra-Q8_0.gguf": tiny_bytes, "mmproj-extra-f16.gguf": b"x" * 10},
        }
    )


def page_options(
    entries: Sequence[CatalogueEntry],
    hub: FakeHubClient,
    downloader: FakeDownloader,
    models_dir: Path,
    gate: Gate,
    prompts: object,
    free: FreeMemory,
) -> dict[str, Any]:
    """The "Get models" page's keyword arguments: the fake Hub, canned prompts, given free memory."""
    services = fake_services(hub, downloader, models_dir, gate)
    return {
        "services": lambda: services,
        "prompts": prompts,
        "entries": list(entries),
        "free_memory": lambda: free,
        "quick_memory": lambda: free,
    }
