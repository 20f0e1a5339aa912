"""Images on the way in: OpenAI `image_url` parts (data URLs only, never fetched) and Ollama's
`images` (base64 strings).

A link (`https:`, `file:`) would make the server reach out on a client's word, so it is refused
like any other bad part; an image is decoded and checked (kind, pixel bound) before anything
else sees it (`engine.backends.image_input`), with the same limits on both APIs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from desktop.serve.errors import bad_request
from engine.api.errors import ConfigError
from engine.api.values import ImageData, base64_length, from_base64, from_data_url

MAX_IMAGES = 8  # per message, as the window's MAX_PENDING
# Per image over the API, below the engine's own 64 MB: a phone photo fits, and a whole
# request's images stay within a body the server buffers (`IMAGES_BODY_BYTES`).
MAX_IMAGE_BYTES = 8 * 1024 * 1024
IMAGES_BODY_BYTES = MAX_IMAGES * (base64_length(MAX_IMAGE_BYTES) + 64)  # a message's images as data URLs


def images_length(messages: Sequence[Mapping[str, Any]]) -> int:
    """How much of the request body the messages' images took, as base64 data URLs."""
    return sum(base64_length(len(i.data)) for m in messages for i in m.get("images") or () if isinstance(i, ImageData))


def part_images(parts: Sequence[tuple[int, Any]], where: str) -> list[ImageData]:
    """The images of a message's `image_url` parts (each with its index among the parts), in order."""
    if len(parts) > MAX_IMAGES:
        raise bad_request(f"'{where}' has {len(parts)} images; at most {MAX_IMAGES}", where)
    return [_image(ref, f"{where}[{i}]") for i, ref in parts]


def _image(ref: Any, where: str) -> ImageData:
    url: Any = cast(dict[str, Any], ref).get("url") if isinstance(ref, dict) else ref
    if not isinstance(url, str):
        raise bad_request(f"'{where}.image_url.url' must be a string", where)
    try:
        return ImageData(
            from_data_url(url, "the image", MAX_IMAGE_BYTES), f"image{where.rsplit('[', 1)[-1].rstrip(']')}"
        )
    except ConfigError as exc:
        raise bad_request(f"'{where}.image_url': {exc}", where) from None


def base64_images(value: Any, where: str) -> list[ImageData]:
    """Ollama's `images`: base64 strings (a data URL is taken too), at most `MAX_IMAGES`."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise bad_request(f"'{where}' must be an array of base64 strings", where)
    items = cast(list[Any], value)
    if len(items) > MAX_IMAGES:
        raise bad_request(f"'{where}' has {len(items)} images; at most {MAX_IMAGES}", where)
    return [_base64_image(item, f"{where}[{i}]") for i, item in enumerate(items)]


def _base64_image(item: Any, where: str) -> ImageData:
    if not isinstance(item, str):
        raise bad_request(f"'{where}' must be a base64 string", where)
    try:
        if item.startswith("data:"):
            data = from_data_url(item, "the image", MAX_IMAGE_BYTES)
        else:
            data = from_base64(item, "the image", limit=MAX_IMAGE_BYTES)
    except ConfigError as exc:
        raise bad_request(f"'{where}': {exc}", where) from None
    return ImageData(data, f"image{where.rsplit('[', 1)[-1].rstrip(']')}")
