"""Images in the in-process prompt: llama.cpp's multimodal library (libmtmd) and a projector.

A vision model is a chat model plus its projector (`mmproj*.gguf`). `Projector` loads the
projector against the loaded model; `image_span` turns one image into what the prompt holds
in its place: the text tokens mtmd puts around it (begin/end markers, for models that have
them) and the image's own positions. Those positions enter the prompt's token list as
*pseudo-ids*, negative numbers derived from the image's digest and its offset, so the KV
cache's prefix reuse (`llama_decode.KvCache`) treats the image as opaque: the same image at
the same place compares equal and is kept, a changed one differs and is evaluated again. The
`Span` evaluates the image's chunk (encode, then decode its embeddings) at its position.

Each `Span` owns a copy of its chunk, freed when the last reference to the span goes: the
projector's image cache and the backend's prompt cache hold spans independently, so evicting
a picture from one never leaves the other pointing at freed memory.

Images are bounded before they reach stb_image (`image_input.check_image`).
"""

from __future__ import annotations

import ctypes
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.backends.base import Message
from engine.backends.image_input import ImageData, check_image, image_digest
from engine.errors import ConfigError, ModelLoadError
from engine.llama import llama_log
from engine.llama.llama_decode import DecodeError

IMAGE_CACHE_SIZE = 16  # images tokenized and kept (a conversation's recent pictures)
_PSEUDO_SPACE = 1 << 30  # pseudo-ids fit a signed 32-bit token (the receipt hashes them as such)


def _mtmd() -> Any:
    """llama-cpp-python's libmtmd bindings (loaded with the first projector), untyped: their
    stubs type pointers more narrowly than the ctypes calls they take."""
    from llama_cpp import mtmd_cpp

    return mtmd_cpp


def pseudo_ids(key: str, n: int) -> list[int]:
    """The prompt's stand-ins for an image's `n` positions: negative, never a vocabulary id."""
    base = int(image_digest(key.encode("utf-8"))[:15], 16) % _PSEUDO_SPACE
    return [-(1 + (base + i) % _PSEUDO_SPACE) for i in range(n)]


def is_pseudo(token: int) -> bool:
    return token < 0


class Span:
    """One image's chunk in the prompt: `n_pos` positions, evaluated by `evaluate(ctx, at, n_batch)`.

    Owns `chunk` (a copy made for it, `mtmd_input_chunk_copy`), freed with the span."""

    def __init__(self, projector: Projector, chunk: Any, n_pos: int, n_tokens: int) -> None:
        self._projector = projector
        self._chunk = chunk
        self._free = weakref.finalize(self, _mtmd().mtmd_input_chunk_free, chunk)
        self.n_pos = n_pos
        self.n_tokens = n_tokens

    def evaluate(self, ctx: Any, at: int, n_batch: int) -> None:
        """Encode the image and decode its embeddings at positions `at`…; BackendError if mtmd fails."""
        m = _mtmd()

        if not self._projector.ctx:
            raise ConfigError("the vision projector was closed; load the model again")
        new_past = ctypes.c_int32(0)
        code = m.mtmd_helper_eval_chunk_single(
            self._projector.ctx, ctx, self._chunk, at, 0, n_batch, False, ctypes.byref(new_past)
        )
        if code != 0:  # llama_decode's own code (2: the abort callback stopped it)
            raise DecodeError(code)


def _owned(chunk: Any) -> Any:
    """A copy of `chunk` that its Span owns (the tokenized list it came from is freed at once)."""
    owned = _mtmd().mtmd_input_chunk_copy(chunk)
    if not owned:
        raise MemoryError("the image's chunk could not be copied")
    return owned


@dataclass(frozen=True, slots=True)
class ImageTokens:
    """What stands in the prompt for one image: ids (text ids and pseudo-ids) and the image's spans
    by their offset in `ids`."""

    ids: tuple[int, ...]
    spans: tuple[tuple[int, Span], ...]


class Projector:
    """A loaded projector (mtmd context) for one loaded model. Close it before the model."""

    def __init__(self, path: Path, model: Any, n_threads: int, *, use_gpu: bool = False) -> None:
        m = _mtmd()

        llama_log.install_mtmd()
        self.path = path
        params = m.mtmd_context_params_default()
        params.use_gpu = use_gpu
        params.n_threads = n_threads
        params.print_timings = False
        params.warmup = False
        self.ctx: Any = m.mtmd_init_from_file(str(path).encode("utf-8"), model, params)
        if not self.ctx:
            raise ModelLoadError(
                f"{path.name}: the vision projector did not load (not a projector for this model, or a damaged file)"
            )
        if not m.mtmd_support_vision(self.ctx):
            self.close()
            raise ModelLoadError(f"{path.name}: this projector takes no images (an audio projector?)")
        self._lock = threading.Lock()
        self._images: OrderedDict[str, ImageTokens] = OrderedDict()  # spans own their chunks

    def tokens(self, image: ImageData) -> ImageTokens:
        """The image's stand-in ids and spans, tokenized once per image (cached by digest)."""
        key = image.digest
        with self._lock:
            known = self._images.get(key)
            if known is not None:
                self._images.move_to_end(key)
                return known
        result = self._tokenize(image, key)
        with self._lock:
            self._images[key] = result
            while len(self._images) > IMAGE_CACHE_SIZE:
                self._images.popitem(last=False)  # its spans live on where a prompt still holds them
        return result

    def _tokenize(self, image: ImageData, digest: str) -> ImageTokens:
        m = _mtmd()

        check_image(image.data, image.name)
        buf = (ctypes.c_uint8 * len(image.data)).from_buffer_copy(image.data)
        bitmap = m.mtmd_helper_bitmap_init_from_buf(self.ctx, buf, len(image.data), False)
        if not bitmap:
            raise ConfigError(f"{image.name} could not be decoded (a damaged or unsupported picture)")
        chunks: Any = m.mtmd_input_chunks_init()
        try:
            marker = m.mtmd_default_marker()
            text = m.mtmd_input_text(marker, len(marker), False, True)
            bitmaps = (m.mtmd_bitmap_p_ctypes * 1)(bitmap)
            code = m.mtmd_tokenize(self.ctx, chunks, ctypes.byref(text), bitmaps, 1)
            if code != 0:
                raise ConfigError(f"{image.name} could not be prepared for the model (mtmd returned {code})")
            return self._stand_in(chunks, digest)
        finally:
            if chunks:
                m.mtmd_input_chunks_free(chunks)  # the spans took copies of the image chunks
            m.mtmd_bitmap_free(bitmap)

    def _stand_in(self, chunks: Any, digest: str) -> ImageTokens:
        m = _mtmd()

        ids: list[int] = []
        spans: list[tuple[int, Span]] = []
        for i in range(m.mtmd_input_chunks_size(chunks)):
            chunk = m.mtmd_input_chunks_get(chunks, i)
            if m.mtmd_input_chunk_get_type(chunk) == m.MTMD_INPUT_CHUNK_TYPE_TEXT:
                n = ctypes.c_size_t(0)
                text = m.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(n))
                ids.extend(int(text[j]) for j in range(n.value))
                continue
            span = Span(
                self,
                _owned(chunk),
                int(m.mtmd_input_chunk_get_n_pos(chunk)),
                int(m.mtmd_input_chunk_get_n_tokens(chunk)),
            )
            spans.append((len(ids), span))
            ids.extend(pseudo_ids(f"{digest}:{i}", span.n_pos))
        return ImageTokens(tuple(ids), tuple(spans))

    def close(self) -> None:
        m = _mtmd()

        if hasattr(self, "_images"):
            self._images.clear()  # spans still held elsewhere free their own chunks; none evaluates now
        if getattr(self, "ctx", None):
            m.mtmd_free(self.ctx)
            self.ctx = None


def with_markers(messages: Sequence[Message], marker: str) -> tuple[list[Message], list[ImageData]]:
    """The messages with each image replaced by `marker` before its message's text, and the
    images in prompt order."""
    out: list[Message] = []
    images: list[ImageData] = []
    for message in messages:
        found = list(message.get("images") or ())
        if not found:
            out.append(message)
            continue
        images.extend(found)
        rest = message.copy()
        del rest["images"]
        rest["content"] = marker * len(found) + "\n" + message["content"]
        out.append(rest)
    return out, images


def tokenize_with_images(
    text: str,
    marker: str,
    images: list[ImageData],
    projector: Projector,
    tokenize: Callable[[str], list[int]],
    ids: list[int],
    media: dict[int, Span],
) -> None:
    """Append `text`'s ids to `ids`, each `marker` replaced by the next image of `images` (taken
    from its front), recording each image's span by its offset in `ids`."""
    parts = text.split(marker)
    for i, part in enumerate(parts):
        if part:
            ids.extend(tokenize(part))
        if i == len(parts) - 1:
            break
        if not images:
            raise ConfigError("the prompt holds more image places than images")
        stand_in = projector.tokens(images.pop(0))
        for offset, span in stand_in.spans:
            media[len(ids) + offset] = span
        ids.extend(stand_in.ids)
