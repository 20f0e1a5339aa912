"""The images messages carry: content-addressed files beside the history database.

An image is stored once, as `images/<first two hex digits>/<sha256>` in the data folder, however
many messages carry it; `message_images` rows name it by digest, in order. When the last
conversation that holds an image is purged, `prune` removes its file. Reads check the digest,
so a file changed on disk is refused rather than shown or sent as another picture. A missing or
changed file never blocks its conversation: `read_images` leaves it out and names it as a
`DamagedImage` (the view shows a placeholder, the export a note), and the rest is read.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from engine.backends.image_input import MAX_BYTES, ImageData, check_image, image_digest
from engine.history.types import HistoryError

log = logging.getLogger(__name__)


class HistoryStore(Protocol):
    """What image storage needs of `engine.history.store.HistoryStore` (which prunes through this module)."""

    @property
    def db_path(self) -> Path: ...

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]: ...


def image_folder(store: HistoryStore) -> Path:
    return store.db_path.parent / "images"


def _file(store: HistoryStore, digest: str) -> Path:
    return image_folder(store) / digest[:2] / digest


def save_images(store: HistoryStore, message_id: int, images: Sequence[ImageData]) -> None:
    """Write `images`' files (once per content) and record them, in order, for the message."""
    for position, image in enumerate(images):
        info = check_image(image.data, image.name)
        digest = image.digest
        _write_once(_file(store, digest), image.data)
        store.execute(
            "INSERT INTO message_images (message_id, position, sha256, mime, name) VALUES (?, ?, ?, ?, ?)",
            (message_id, position, digest, info.mime, image.name),
        )


def _write_once(path: Path, data: bytes) -> None:
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".part-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@dataclass(frozen=True, slots=True)
class DamagedImage:
    """A stored image that could not be read back: its name and why, in one line."""

    name: str
    note: str


@dataclass(slots=True)
class StoredImages:
    """A branch's images by message id: those read back, and those missing or changed on disk."""

    found: dict[int, list[ImageData]] = field(default_factory=lambda: dict[int, list[ImageData]]())
    damaged: dict[int, list[DamagedImage]] = field(default_factory=lambda: dict[int, list[DamagedImage]]())


def read_images(store: HistoryStore, message_ids: Iterable[int]) -> StoredImages:
    """The images of each of `message_ids`, in order, the damaged ones apart."""
    ids = list(message_ids)
    out = StoredImages()
    if not ids or not store.execute("SELECT 1 FROM message_images LIMIT 1"):
        return out  # the usual case (no pictures anywhere): one tiny query, not one per 500 messages
    for start in range(0, len(ids), 500):  # SQLite's bound-parameter limit
        part = ids[start : start + 500]
        marks = ",".join("?" * len(part))
        rows = store.execute(
            f"SELECT message_id, sha256, name FROM message_images WHERE message_id IN ({marks}) "
            "ORDER BY message_id, position",
            tuple(part),
        )
        for row in rows:
            message_id, name = int(row[0]), str(row[2])
            try:
                image = read_image(store, str(row[1]), name)
            except HistoryError as exc:  # the conversation opens without it
                log.warning("message %d: %s", message_id, exc)
                out.damaged.setdefault(message_id, []).append(DamagedImage(name, str(exc)))
                continue
            out.found.setdefault(message_id, []).append(image)
    return out


def read_image(store: HistoryStore, digest: str, name: str = "image") -> ImageData:
    try:
        with _file(store, digest).open("rb") as f:
            data = f.read(MAX_BYTES + 1)  # a file grown past any stored image fails the digest below
    except OSError as exc:
        raise HistoryError(f"the image {name} is missing from {image_folder(store)}: {exc.strerror or exc}") from None
    if image_digest(data) != digest:
        raise HistoryError(f"the image {name} in {image_folder(store)} was changed on disk; it is not used")
    return ImageData(data, name)


def prune(store: HistoryStore) -> int:
    """Remove the image files no message refers to any more; return how many."""
    folder = image_folder(store)
    if not folder.is_dir():
        return 0
    kept = {str(r[0]) for r in store.execute("SELECT DISTINCT sha256 FROM message_images")}
    removed = 0
    for path in folder.glob("*/*"):
        if path.name not in kept and not path.name.startswith(".part-"):
            with contextlib.suppress(OSError):
                path.unlink()
                removed += 1
    return removed


def copy_images(store: HistoryStore, from_id: int, to_id: int) -> None:
    """A new version of a question keeps the images of the one it replaces."""
    store.execute(
        "INSERT INTO message_images (message_id, position, sha256, mime, name) "
        "SELECT ?, position, sha256, mime, name FROM message_images WHERE message_id = ?",
        (to_id, from_id),
    )
