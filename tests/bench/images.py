"""`ember bench`: an image through the in-process path, with the fixture projector.

- `image_prefill_ms`: a first turn with one picture at the projector's native size (28×28),
  from an empty cache to the first token: the image encoded and its embeddings decoded, and
  the text around it. The fixture's encoder is tiny, so this is mostly the model's side.
- `image_kv_reuse_speedup`: the same conversation's second turn (the picture not evaluated
  again, its span kept in the KV cache) against the first, time to first token.

The projector is the random-weight fixture (`vision_fixture`), written with the `gguf`
package (a development dependency): without it, or if libmtmd refuses it, the figures are
null and a note says why. Medians of `runs` interleaved pairs.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from engine.backends.base import Request, Sampling, StreamInfo, make_request
from engine.backends.image_input import ImageData
from engine.cancel import CancelToken
from engine.errors import EngineError
from engine.events import Piece

FIELDS = ("image_prefill_ms", "image_kv_reuse_speedup")
NATIVE = 28


def measure_images(model: Path, runs: int, notes: list[str], n_threads: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = dict.fromkeys(FIELDS)
    try:
        from tests.bench.vision_fixture import png, write_projector_fixture
    except ImportError as exc:
        notes.append(f"images: the fixture projector needs the gguf package ({exc})")
        return out
    from engine.llama.llama import LlamaBackend

    with tempfile.TemporaryDirectory(prefix="ember-bench-vision-") as folder:
        projector = write_projector_fixture(Path(folder) / "mmproj-fixture.gguf")
        try:
            backend = LlamaBackend(model, n_ctx=1024, n_threads=n_threads, projector=projector)
        except EngineError as exc:
            notes.append(f"images: the fixture projector did not load: {exc}")
            return out
        try:
            first, second = _pairs(backend, png(NATIVE, NATIVE), max(runs, 1))
        finally:
            backend.close()
    out["image_prefill_ms"] = round(statistics.median(first), 1)
    out["image_kv_reuse_speedup"] = round(statistics.median(first) / max(statistics.median(second), 1e-6), 2)
    return out


def _pairs(backend: Any, picture: bytes, runs: int) -> tuple[list[float], list[float]]:
    first: list[float] = []
    second: list[float] = []
    question = {"role": "user", "content": "Describe the picture.", "images": [ImageData(picture, "bench.png")]}
    for _ in range(runs):
        backend.reset_cache()
        ask = make_request([question], sampling=Sampling.greedy(), max_tokens=1)
        first.append(_first_token_ms(backend, ask))
        follow = make_request(
            [question, {"role": "assistant", "content": "A picture."}, {"role": "user", "content": "And its colours?"}],
            sampling=Sampling.greedy(),
            max_tokens=1,
        )
        second.append(_first_token_ms(backend, follow))
    return first, second


def _first_token_ms(backend: Any, request: Request) -> float:
    started = time.perf_counter()
    for item in backend.stream(request, CancelToken(), StreamInfo()):
        if isinstance(item, Piece):
            break
    return (time.perf_counter() - started) * 1000
