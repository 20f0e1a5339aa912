"""Run in a child process by tests/test_vision_engine.py: more images than the projector keeps.

A freed image chunk evaluated by mtmd would crash the process (or read garbage), so the test
runs this apart from pytest and reads its exit status and last line. Usage:
`python -m tests.vision_eviction_child MODEL FOLDER`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from engine.backends.base import Sampling, StreamInfo, make_request
from engine.backends.image_input import ImageData
from engine.cancel import CancelToken
from engine.events import FinishReason
from engine.llama.llama import LlamaBackend
from engine.llama.llama_media import IMAGE_CACHE_SIZE
from tests.projector_fixture import png, write_projector_fixture


def picture(n: int) -> ImageData:
    return ImageData(png(28, 28, seed=100 + n), f"picture{n}.png")


def turn(backend: Any, messages: list[dict[str, Any]]) -> StreamInfo:
    info = StreamInfo()
    request = make_request(messages, sampling=Sampling.greedy(), max_tokens=2)
    for _ in backend.stream(request, CancelToken(), info):
        pass
    assert info.finish_reason in (FinishReason.STOP, FinishReason.LENGTH), info.finish_reason
    return info


def many_images_over_turns(backend: Any) -> None:
    """One conversation gathers IMAGE_CACHE_SIZE + 2 pictures, one per turn, all in its prompt."""
    history: list[dict[str, Any]] = []
    for n in range(IMAGE_CACHE_SIZE + 2):
        history.append({"role": "user", "content": f"Picture {n}.", "images": [picture(n)]})
        turn(backend, history)
        history.append({"role": "assistant", "content": "Seen."})


def rerun_after_eviction(backend: Any) -> None:
    """A remembered prompt is run again after more pictures than the projector keeps went by."""
    backend.reset_cache()
    first = [{"role": "user", "content": "The first.", "images": [picture(500)]}]
    turn(backend, first)
    others = [picture(600 + n) for n in range(IMAGE_CACHE_SIZE + 1)]
    turn(backend, [{"role": "user", "content": "All of these.", "images": others}])
    info = turn(backend, first)  # its prompt is still remembered; its image's chunk must be too
    assert info.cached_tokens < info.prompt_tokens - 4  # the image was evaluated again, not skipped


def main(model: str, folder: str) -> None:
    projector = write_projector_fixture(Path(folder) / "mmproj-fixture.gguf")
    backend = LlamaBackend(Path(model), n_ctx=2048, projector=projector)
    try:
        many_images_over_turns(backend)
        rerun_after_eviction(backend)
    finally:
        backend.close()
    print("survived")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
