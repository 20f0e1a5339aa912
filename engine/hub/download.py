"""Downloading one item (a model's file, every shard of a split model, a model and its projector).

    files = client.list_gguf("bartowski/Qwen2.5-7B-Instruct-GGUF")
    paths = download(pick_files(files, "Q4_K_M"), default_models_dir(ember_paths()), client=client,
                     progress=show, cancel=token)

Files land in `dest_dir/<owner>/<name>/<path in the repository>`, where the library lists
them. Before the first byte the free disk space is checked against what is still missing.
Each file streams into its `.part` and is hashed by Ember on the way (`engine.hub.transfer`);
only when every file of the item is complete and matches the Hub's SHA-256 do they take
their final names (`os.replace`, atomic), after their origin (repository, revision, SHA-256,
size, date) is recorded in `models.library.origins` for the receipts. Nothing ever has a
final name while half-written, and a cut, a kill, a cancel or a restart resumes from the
`.part` at the next call with the same files; its progress starts at the bytes already
there. While no byte arrives the progress is still reported (every TICK_S), with the speed
falling to 0, no time left, and `waiting_s` saying how long the server has been silent.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
import unicodedata
from collections import deque
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from engine.cancel import CancelToken
from engine.hub.client import FEATURE, HubClient
from engine.hub.consent import allow_downloads, downloads_allowed
from engine.hub.errors import DownloadCancelled, DownloadError, HubError
from engine.hub.files import HubFile
from engine.hub.transfer import fetch, meta_path, part_path
from engine.network.guard import feature
from models.library.digests import file_sha256, remember_sha256
from models.library.jsonstore import fsync_dir
from models.library.origins import Origin, origin_of, record_origins
from models.library.paths import EmberPaths, ember_paths

__all__ = [
    "DownloadCancelled",
    "DownloadError",
    "Progress",
    "allow_downloads",
    "default_models_dir",
    "download",
    "downloads_allowed",
    "target_path",
]

RESERVE_BYTES = 64 << 20  # left free on the disk after a download
SPEED_WINDOW_S = 3.0  # the speed shown is the average over this many seconds
REPORT_EVERY_S = 0.1
TICK_S = 1.0  # progress is reported at least this often, bytes or not
WAITING_S = 5.0  # silent this long, the server is shown as being waited for (no time left is guessed)


@dataclass(frozen=True, slots=True)
class Progress:
    done: int  # bytes of the whole item, including those from an earlier try
    total: int
    bytes_per_s: float  # over the last few seconds, network bytes only
    seconds_left: float | None  # None until there is a speed to go by, and while waiting
    file: str  # the file being fetched (its name)
    waiting_s: float = 0.0  # how long no byte has arrived, once that is WAITING_S or more (else 0)


def default_models_dir(paths: EmberPaths) -> Path:
    """Ember's models folder, which the library always lists (`models.library.scan`)."""
    return paths.models_dir


def target_path(dest_dir: Path, file: HubFile) -> Path:
    """Where `file` lands: `dest_dir/<owner>/<name>/<path in the repository>` (nothing outside)."""
    parts = [*file.repo.split("/"), *PurePosixPath(file.path).parts]
    if any(p in ("", ".", "..") or p.startswith("/") or "\\" in p or _has_controls(p) for p in parts):
        raise DownloadError(f"refusing the file name {file.path!r} from {file.repo}")
    return dest_dir.joinpath(*parts)


def _has_controls(name: str) -> bool:
    """NUL, line breaks, escapes, bidi overrides: no file name of a model holds one (`Cc`, `Cf`)."""
    return any(unicodedata.category(c) in ("Cc", "Cf") for c in name)


def disk_free(folder: Path) -> int:
    """Free bytes on the disk that holds `folder` (or would, once created)."""
    probe = folder
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    return shutil.disk_usage(probe).free


def download(
    files: Sequence[HubFile],
    dest_dir: Path,
    *,
    client: HubClient,
    progress: Callable[[Progress], None] | None = None,
    cancel: CancelToken | None = None,
    free_space: Callable[[Path], int] = disk_free,
    paths: EmberPaths | None = None,
) -> list[Path]:
    """Download `files` as one item; returns their final paths (in the order given).

    Raises DownloadError (one line; DownloadCancelled when `cancel` was set), keeping the
    `.part` files of anything that was not bad, so the next call resumes.
    """
    if not files:
        raise DownloadError("nothing to download")
    paths = paths or ember_paths()
    unique: dict[Path, HubFile] = {}
    for f in files:  # a file listed twice is fetched (and renamed) once
        unique.setdefault(target_path(dest_dir, f), f)
    targets = [(f, final) for final, f in unique.items()]
    missing = [(f, final) for f, final in targets if not _already_there(f, final, paths)]
    meter = _Meter(sum(f.size for f, _ in targets), progress)
    # Counted without a report: the first report comes with the bytes a `.part` holds (a resume starts there).
    meter.done = sum(f.size for f, _ in targets) - sum(f.size for f, _ in missing)
    if missing:
        _check_space(missing, dest_dir, free_space)
        try:
            with _ticking(meter):
                digests = _fetch_all(missing, client, meter, cancel)
        except DownloadError:
            _prune_empty({final.parent for _, final in missing}, dest_dir)
            raise
        _put_in_place(missing, digests, client, paths)
    meter.report(force=True)
    return [target_path(dest_dir, f) for f in files]


def _already_there(file: HubFile, final: Path, paths: EmberPaths) -> bool:
    """True when `final` is this very file (recorded, or hashed to the Hub's digest); DownloadError if another."""
    if not final.exists():
        return False
    origin = origin_of(final, paths)
    size = final.stat().st_size
    if origin is not None and size == file.size and origin.sha256 == (file.sha256 or origin.sha256):
        return True
    if file.sha256 is not None and size == file.size and file_sha256(final, paths) == file.sha256:
        return True
    raise DownloadError(
        f"{final} already exists and is not {file.repo}/{file.path} at this revision; "
        f"move it away or remove it (ember models rm) first"
    )


def _check_space(missing: Sequence[tuple[HubFile, Path]], dest_dir: Path, free_space: Callable[[Path], int]) -> None:
    need = sum(max(0, f.size - _part_size(final)) for f, final in missing)
    free = free_space(dest_dir)
    if need + RESERVE_BYTES > free:
        raise DownloadError(
            f"not enough disk space in {dest_dir}: the download needs {_gb(need)} more "
            f"(and {_gb(RESERVE_BYTES)} to spare), {_gb(free)} are free; nothing was downloaded"
        )


def _part_size(final: Path) -> int:
    try:
        return part_path(final).stat().st_size
    except OSError:
        return 0


def _fetch_all(
    missing: Sequence[tuple[HubFile, Path]], client: HubClient, meter: _Meter, cancel: CancelToken | None
) -> list[str]:
    digests: list[str] = []
    with feature(FEATURE):
        try:
            client.check_allowed()
        except HubError as exc:
            raise DownloadError(str(exc)) from exc
        for file, final in missing:
            meter.file = file.name
            digests.append(fetch(file, final, client=client, on_bytes=meter.add, cancel=cancel))
    return digests


def _put_in_place(
    missing: Sequence[tuple[HubFile, Path]], digests: Sequence[str], client: HubClient, paths: EmberPaths
) -> None:
    """Record where the files came from, then give every file its final name (each rename atomic)."""
    when = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    record_origins(
        {
            final: Origin(f.repo, f.path, f.revision, sha, f.size, when, client.endpoint)
            for (f, final), sha in zip(missing, digests, strict=True)
        },
        paths,
    )
    # Projectors first: a vision model never has its final name before its projector does.
    renames = sorted(zip(missing, digests, strict=True), key=lambda item: not item[0][0].is_projector)
    for (_, final), sha in renames:
        os.replace(part_path(final), final)
        meta_path(final).unlink(missing_ok=True)
        fsync_dir(final.parent)
        with contextlib.suppress(OSError):
            remember_sha256(final, sha, paths)


def _prune_empty(folders: set[Path], top: Path) -> None:
    """Remove the folders a failed download created and left empty (never `top` itself)."""
    for folder in sorted(folders, key=lambda p: -len(p.parts)):
        while folder != top and top in folder.parents:
            try:
                folder.rmdir()  # only when empty
            except OSError:
                break
            folder = folder.parent


@contextlib.contextmanager
def _ticking(meter: _Meter) -> Generator[None]:
    """Report progress every TICK_S while the block runs, so a silent server shows as waited for."""
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(TICK_S):
            if meter.started:  # before the first figures, the caller's "asking the Hub" stays
                meter.report(force=True)

    ticker = threading.Thread(target=tick, name="download-progress", daemon=True)
    ticker.start()
    try:
        yield
    finally:
        stop.set()
        ticker.join()


class _Meter:
    """Bytes done over the whole item, the recent speed, and throttled reports (from two threads)."""

    def __init__(self, total: int, report: Callable[[Progress], None] | None) -> None:
        self.total, self._report = total, report
        self.done = 0
        self.file = ""
        self._samples: deque[tuple[float, int]] = deque()
        self._received = 0
        self._last = 0.0
        self._last_byte = time.monotonic()
        self._lock = threading.Lock()
        self.started = False

    def add(self, n: int, received: bool) -> None:
        with self._lock:
            self.started = True
            self.done += n
            if received:
                self._received += n
                self._last_byte = time.monotonic()
        self.report()

    def speed(self, now: float) -> float:
        self._samples.append((now, self._received))
        while len(self._samples) > 2 and now - self._samples[0][0] > SPEED_WINDOW_S:
            self._samples.popleft()
        t0, r0 = self._samples[0]
        return (self._received - r0) / (now - t0) if now > t0 else 0.0

    def report(self, force: bool = False) -> None:
        with self._lock:
            now = time.monotonic()
            if self._report is None or (not force and now - self._last < REPORT_EVERY_S):
                return
            self._last = now
            speed = self.speed(now)
            silent = now - self._last_byte
            waiting = silent if silent >= WAITING_S and self.done < self.total else 0.0
            if waiting:
                speed = 0.0  # the last speed seen is not the speed now
            left = (self.total - self.done) / speed if speed > 0 else None
            self._report(Progress(self.done, self.total, speed, left, self.file, waiting))


def _gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"
