"""Images given to a model: their kind and size read from the header, bounded before decoding.

Every image reaches a decoder (llama.cpp's stb_image in-process, a server's remotely) only after
`check_image` has read its format and pixel size from the first bytes itself, so a 30,000×30,000
header, a decompression bomb (a small file declaring a huge picture), a text file named `.png`
or a truncated header ends here in one line, before any memory is spent on pixels. Formats are
the ones stb_image and the OpenAI-compatible servers both decode: PNG, JPEG, GIF (first frame),
BMP. WebP is left out: stb_image cannot read it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import stat
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from engine.errors import ConfigError

MAX_PIXELS = 40_000_000  # ~ an 8K screenshot; 160 MB as RGBA, decoded once
MAX_BYTES = 64 * 1024 * 1024
MAX_MESSAGE_IMAGES = 8  # pictures one message carries (the window, `ember chat --image`, imports)
NO_PROJECTOR = (
    "this model has no vision projector, so it cannot see images; put its mmproj file beside it "
    "or choose one in the model's settings"
)
_HEAD_BYTES = 64 * 1024  # enough for every header but a JPEG's, which is walked
_JPEG_MAX_STEPS = 100_000
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_BINARY = getattr(os, "O_BINARY", 0)
_JPEG_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


@dataclass(frozen=True, slots=True)
class ImageInfo:
    """What the header says: `mime` ("image/png"…), width and height in pixels."""

    mime: str
    width: int
    height: int

    @property
    def extension(self) -> str:
        return self.mime.split("/")[1].replace("jpeg", "jpg")


def image_digest(data: bytes) -> str:
    """The image's content address: a SHA-256 hex digest of its bytes."""
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, slots=True)
class ImageData:
    """An image in a message (`message["images"]`): its encoded bytes (PNG, JPEG…).

    `str()` is its content address, so a request's prompt key names images by digest
    without dumping their bytes.
    """

    data: bytes
    name: str = "image"

    @property
    def digest(self) -> str:
        return image_digest(self.data)

    def __str__(self) -> str:
        return f"image:sha256:{self.digest}"


def refuse_unseen(vision: bool, backend: str, messages: Sequence[Mapping[str, Any]], why: str = "") -> None:
    """ConfigError (one line) when messages carry images a backend cannot see (`why`: a refused projector)."""
    if not vision and any(message_images(m) for m in messages):
        raise ConfigError(f"{backend}: {why or NO_PROJECTOR}")


def message_images(message: Mapping[str, Any]) -> list[ImageData]:
    """The images a message carries (`message["images"]`), in order."""
    return [i for i in message.get("images") or () if isinstance(i, ImageData)]


def wire_content(message: Mapping[str, Any]) -> str | list[dict[str, Any]]:
    """The message's content as the chat-completions API takes it: with images, a list of
    parts, the text first, then each image as an `image_url` data URL (never a link)."""
    text = message.get("content")
    images = message_images(message)
    if not images:
        return text if isinstance(text, str) else str(text or "")
    parts: list[dict[str, Any]] = [{"type": "text", "text": str(text or "")}] if text else []
    parts += [{"type": "image_url", "image_url": {"url": data_url(i.data, i.name)}} for i in images]
    return parts


def check_image(data: bytes, name: str = "image") -> ImageInfo:
    """The image's kind and size, or ConfigError in one line naming `name`."""
    if len(data) > MAX_BYTES:
        raise ConfigError(f"{name} is {len(data) // 2**20} MB; images over {MAX_BYTES // 2**20} MB are refused")
    info = _sniff(data)
    if info is None:
        raise ConfigError(f"{name} is not a PNG, JPEG, GIF or BMP picture (or it is cut short)")
    if info.width <= 0 or info.height <= 0:
        raise ConfigError(f"{name} declares an empty picture ({info.width}×{info.height})")
    if info.width * info.height > MAX_PIXELS:
        raise ConfigError(
            f"{name} is {info.width}×{info.height} pixels; pictures over "
            f"{MAX_PIXELS // 1_000_000} megapixels are refused"
        )
    return info


def _sniff(data: bytes) -> ImageInfo | None:
    if data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) >= 24 and data[12:16] == b"IHDR":
        width, height = struct.unpack(">II", data[16:24])
        return ImageInfo("image/png", width, height)
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        width, height = struct.unpack("<HH", data[6:10])
        return ImageInfo("image/gif", width, height)
    if data.startswith(b"BM") and len(data) >= 26:
        width, height = struct.unpack("<ii", data[18:26])
        return ImageInfo("image/bmp", width, abs(height))
    if data.startswith(b"\xff\xd8"):
        return _jpeg(data)
    return None


def _jpeg(data: bytes) -> ImageInfo | None:
    return _jpeg_walk(lambda at, n: data[at : at + n], len(data))


def _jpeg_walk(read: Callable[[int, int], bytes], size: int) -> ImageInfo | None:
    """Walk the JPEG's segments by their lengths to its frame header (SOFn), which holds the size.

    `read(at, n)` gives up to `n` bytes at offset `at` of a `size`-byte file; only the segments'
    heads are read, so EXIF, ICC or XMP blocks of any length before the frame cost nothing."""
    at = 2
    for _ in range(_JPEG_MAX_STEPS):  # a bound for a file of fill bytes or tiny segments
        head = read(at, 4)
        if len(head) < 4 or head[0] != 0xFF:
            return None
        marker = head[1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):  # markers without a length
            at += 2
            continue
        (length,) = struct.unpack(">H", head[2:4])
        if marker in _JPEG_SOF:
            frame = read(at + 5, 4)
            if len(frame) < 4:
                return None
            height, width = struct.unpack(">HH", frame)
            return ImageInfo("image/jpeg", width, height)
        if length < 2 or at + 2 + length > size:
            return None
        at += 2 + length
    return None


class NotAFile(OSError):
    """The path is not a regular file (a pipe, a device, a folder…); the message says which."""


def open_picture(path: Path) -> BinaryIO:
    """`path` opened for reading if it is a regular file; NotAFile (one line) if it is not.

    A FIFO named `photo.png` would block `open()` until someone writes to it, and a link to
    `/dev/zero` reads for ever: the name is resolved once (a link the user chose is followed),
    the target looked at with `lstat`, then opened with `O_NONBLOCK | O_NOFOLLOW` (a pipe or a
    link swapped in after the look can neither block nor redirect the open) and checked again
    on the open descriptor before a byte is read."""
    target = os.path.realpath(path)
    reason = _kind_reason(os.lstat(target).st_mode)
    if reason:
        raise NotAFile(f"{path.name} {reason}")
    fd = os.open(target, os.O_RDONLY | _NONBLOCK | _NOFOLLOW | _CLOEXEC | _BINARY)
    try:
        reason = _kind_reason(os.fstat(fd).st_mode)
        if reason:
            raise NotAFile(f"{path.name} {reason}")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _kind_reason(mode: int) -> str:
    if stat.S_ISREG(mode):
        return ""
    if stat.S_ISDIR(mode):
        return "is a folder, not a picture"
    if stat.S_ISFIFO(mode):
        return "is a pipe (FIFO), not a picture file; refused"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "is a device, not a picture file; refused"
    return "is not a regular file; refused"


def sniff_file(path: Path) -> ImageInfo | None:
    """What `path`'s header says it is (None: not a picture), reading only the header: a JPEG's
    segments before its frame are stepped over by their lengths, however long. OSError if
    unreadable, NotAFile if it is no regular file (never blocks on a pipe)."""
    with open_picture(path) as f:
        head = f.read(_HEAD_BYTES)
        if not head.startswith(b"\xff\xd8"):
            return _sniff(head)
        size = f.seek(0, 2)

        def read(at: int, n: int) -> bytes:
            if at + n <= len(head):
                return head[at : at + n]
            f.seek(at)
            return f.read(n)

        return _jpeg_walk(read, size)


def data_url(data: bytes, name: str = "image") -> str:
    """The image as a `data:` URL (what the OpenAI API takes in an `image_url` part)."""
    info = check_image(data, name)
    return f"data:{info.mime};base64,{base64.b64encode(data).decode('ascii')}"


def base64_length(n: int) -> int:
    """The length of `n` bytes in base64 (padded)."""
    return (n + 2) // 3 * 4


def from_data_url(url: str, name: str = "image", limit: int = MAX_BYTES) -> bytes:
    """The bytes of a `data:image/…;base64,` URL, at most `limit` of them; anything else
    (http:, file:) is refused."""
    head, sep, body = url.partition(",")
    if not sep or not head.startswith("data:image/") or not head.endswith(";base64"):
        raise ConfigError(f"{name}: only data:image/…;base64 URLs are accepted; images are never fetched")
    return from_base64(body, name, "the data URL", limit)


def from_base64(text: str, name: str = "image", what: str = "the image", limit: int = MAX_BYTES) -> bytes:
    """The bytes of a base64 image (Ollama's `images` entries, a data URL's body), at most `limit`."""
    if len(text) > base64_length(limit):  # refused before it is decoded
        raise ConfigError(f"{name} is over {limit // 2**20} MB; refused")
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(f"{name}: {what} is not valid base64") from None
    if len(data) > limit:
        raise ConfigError(f"{name} is over {limit // 2**20} MB; refused")
    check_image(data, name)
    return data


def read_image_file(path: Path) -> ImageData:
    """An image file as a message's image, checked (kind, pixel bound) before anything decodes it."""
    try:
        with open_picture(path) as f:
            size = os.fstat(f.fileno()).st_size
            if size > MAX_BYTES:
                raise ConfigError(f"{path.name} is {size // 2**20} MB; images over {MAX_BYTES // 2**20} MB are refused")
            data = f.read(MAX_BYTES + 1)
    except NotAFile as exc:
        raise ConfigError(str(exc)) from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    check_image(data, path.name)
    return ImageData(data, path.name)
