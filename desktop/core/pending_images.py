"""The pictures the next message carries (the window's attachment chips), Qt-free.

Files are read and checked here (kind and pixel bound from the header) when they are added,
so a bad one is refused in one line at once, not when the message is sent. `sort_dropped` does
that reading for a drop or a paste of files, meant for a worker thread: only regular files are
opened, without blocking (a FIFO named `photo.png`), and a slow disk holds the worker, not the window. The controller
takes them with the message and clears them only once the message is stored; a refused
message keeps them, as it keeps its draft.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.api.errors import ConfigError
from engine.api.values import MAX_MESSAGE_IMAGES, ImageData, NotAFile, check_image, read_image_file, sniff_file

MAX_PENDING = MAX_MESSAGE_IMAGES


@dataclass(frozen=True, slots=True)
class Dropped:
    """One dropped file, sorted: a picture read and checked (`image`), a picture refused
    (`problem`, one line), or neither: a document for the paperclip."""

    path: Path
    image: ImageData | None = None
    problem: str = ""


def sort_dropped(paths: Sequence[Path]) -> list[Dropped]:
    """Each path read as a picture when its header says it is one; no Qt (run it on a worker)."""
    out: list[Dropped] = []
    for path in paths:
        try:
            info = None if path.is_dir() else sniff_file(path)  # a folder goes on to the documents
        except NotAFile as exc:  # a pipe or a device: nothing to attach, whatever it is named
            out.append(Dropped(path, problem=str(exc)))
            continue
        except OSError:
            info = None
        if info is None or info.width <= 0 or info.height <= 0:
            out.append(Dropped(path))
            continue
        try:
            out.append(Dropped(path, image=read_image_file(path)))
        except ConfigError as exc:
            out.append(Dropped(path, problem=str(exc)))
    return out


class PendingImages:
    """The next message's images; `changed` listeners follow every change, `sent` ones each send."""

    def __init__(self) -> None:
        self.items: list[ImageData] = []
        self.changed: list[Callable[[], None]] = []
        self.on_sent: list[Callable[[Sequence[ImageData]], None]] = []

    def add_bytes(self, data: bytes, name: str) -> str | None:
        try:
            check_image(data, name)
        except ConfigError as exc:
            return str(exc)
        return self.add(ImageData(data, name))

    def add(self, image: ImageData) -> str | None:
        if len(self.items) >= MAX_PENDING:
            return f"at most {MAX_PENDING} pictures go with one message"
        self.items.append(image)
        self._changed()
        return None

    def remove(self, index: int) -> None:
        if 0 <= index < len(self.items):
            del self.items[index]
            self._changed()

    def sent(self) -> None:
        """The message went with these images: they leave the composer, and show on the question."""
        images, self.items = self.items, []
        for listener in self.on_sent:
            listener(images)
        self._changed()

    def _changed(self) -> None:
        for listener in self.changed:
            listener()
