"""The pictures the next message carries (the window's attachment chips), Qt-free.

Files are read and checked here (kind and pixel bound from the header) when they are added,
so a bad one is refused in one line at once, not when the message is sent. The controller
takes them with the message and clears them only once the message is stored; a refused
message keeps them, as it keeps its draft.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from engine.backends.image_input import ImageData, check_image, read_image_file, sniff_file
from engine.errors import ConfigError

MAX_PENDING = 8


def is_image_file(path: Path) -> bool:
    """Whether `path` holds a picture (its header says so), whatever its name; a picture too
    big still is one (adding it explains why it is refused)."""
    try:
        info = sniff_file(path)
    except OSError:
        return False
    return info is not None and info.width > 0 and info.height > 0


class PendingImages:
    """The next message's images; `changed` listeners follow every change, `sent` ones each send."""

    def __init__(self) -> None:
        self.items: list[ImageData] = []
        self.changed: list[Callable[[], None]] = []
        self.on_sent: list[Callable[[Sequence[ImageData]], None]] = []

    def add_file(self, path: Path) -> str | None:
        """Add the picture at `path`; None, or why not (one line)."""
        try:
            return self.add(read_image_file(path))
        except ConfigError as exc:
            return str(exc)

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
