"""Images through the in-process backend: SmolLM2 with a random-weight fixture projector.

The projector (tests/projector_fixture.py) is a real libmtmd projector of the "mlp" kind; its
weights are random, so what the reply says means nothing. What is checked is the path: load,
the image's span in the prompt, evaluation before sampling, KV reuse of an unchanged image,
re-evaluation of a changed one, cancel, and the one-line refusal without a projector.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.backends.base import Request, Sampling, StreamInfo, make_request
from engine.cancel import CancelToken
from engine.errors import ConfigError, ModelLoadError
from engine.events import FinishReason, Piece, PromptProgress
from engine.llama.llama_media import ImageData
from tests.projector_fixture import png, write_projector_fixture

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def vision(smollm_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from engine.llama.llama import LlamaBackend

    projector = write_projector_fixture(tmp_path_factory.mktemp("proj") / "mmproj-fixture.gguf")
    backend = LlamaBackend(smollm_path, n_ctx=1024, projector=projector)
    yield backend
    backend.close()


def ask(text: str, *images: bytes, history: tuple[dict[str, Any], ...] = ()) -> Request:
    message: dict[str, Any] = {"role": "user", "content": text}
    if images:
        message["images"] = [ImageData(i, f"picture{n}.png") for n, i in enumerate(images)]
    return make_request([*history, message], sampling=Sampling.greedy(), max_tokens=8)


def run(backend: Any, request: Request, cancel: CancelToken | None = None) -> tuple[str, StreamInfo, int]:
    info = StreamInfo()
    progress = 0
    text = ""
    for item in backend.stream(request, cancel or CancelToken(), info):
        if isinstance(item, PromptProgress):
            progress += 1
        elif isinstance(item, Piece):
            text += item.text
    return text, info, progress


def test_the_image_takes_its_positions_in_the_prompt_and_counts_in_the_fit(vision: Any) -> None:
    plain = vision.count_prompt_tokens(ask("What is this?").messages)
    with_image = vision.count_prompt_tokens(ask("What is this?", png(40, 30)).messages)
    # 4 image positions (28/14 squared) plus the newline after the image's place
    assert with_image - plain >= 4
    assert vision.capabilities.vision


def test_a_turn_with_an_image_evaluates_it_then_streams(vision: Any) -> None:
    vision.reset_cache()
    _text, info, progress = run(vision, ask("Describe the picture.", png(40, 30)))
    assert info.finish_reason in (FinishReason.STOP, FinishReason.LENGTH)
    assert info.completion_tokens > 0
    assert progress >= 1  # reported around the image's evaluation
    assert vision.last_prompt_evaluated == info.prompt_tokens


def test_the_same_image_in_the_same_place_is_reused_and_a_changed_one_is_not(vision: Any) -> None:
    vision.reset_cache()
    first = ask("Describe the picture.", png(40, 30, seed=1))
    run(vision, first)
    again = ask("Describe the picture.", png(40, 30, seed=1))
    _, info, _ = run(vision, again)
    assert vision.last_prompt_evaluated == 1  # only the last token, for fresh logits
    changed = ask("Describe the picture.", png(40, 30, seed=2))
    _, info, _ = run(vision, changed)
    tokens = vision.count_prompt_tokens(changed.messages)
    assert vision.last_prompt_evaluated > tokens - info.cached_tokens - 1
    assert info.cached_tokens < tokens - 4  # the image's span and what follows are evaluated again


def test_a_second_turn_on_the_conversation_keeps_the_image(vision: Any) -> None:
    vision.reset_cache()
    first = ask("Describe the picture.", png(40, 30, seed=3))
    reply, _, _ = run(vision, first)
    history = (*first.messages, {"role": "assistant", "content": reply})
    second = make_request(
        [*history, {"role": "user", "content": "And its colours?"}], sampling=Sampling.greedy(), max_tokens=4
    )
    _, info, _ = run(vision, second)
    assert info.cached_tokens > vision.count_prompt_tokens(first.messages) - 2


def test_cancel_before_the_image_stops_the_turn(vision: Any) -> None:
    vision.reset_cache()
    cancel = CancelToken()
    cancel.cancel()
    _, info, _ = run(vision, ask("Describe the picture.", png(40, 30, seed=4)), cancel)
    assert info.finish_reason is FinishReason.CANCELLED
    assert info.completion_tokens == 0


def test_a_model_without_projector_refuses_an_image_in_one_line(smollm: Any) -> None:
    with pytest.raises(ConfigError) as caught:
        smollm.count_prompt_tokens(ask("What is this?", png(8, 8)).messages)
    assert "no vision projector" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_projector_of_another_width_is_refused_at_load(smollm_path: Path, tmp_path: Path) -> None:
    from engine.llama.llama import LlamaBackend

    wrong = write_projector_fixture(tmp_path / "mmproj-wide.gguf", projection=64)
    with pytest.raises(ModelLoadError) as caught:
        LlamaBackend(smollm_path, n_ctx=256, projector=wrong)
    assert "\n" not in str(caught.value)


def test_hostile_images_end_in_one_line_before_the_decoder(vision: Any) -> None:
    import struct

    from tests.projector_fixture import png_chunks

    huge = png_chunks(struct.pack(">IIBBBBB", 30_000, 30_000, 8, 2, 0, 0, 0), b"")
    for bad in (b"%PDF-1.4 not a picture", png(40, 30)[:40], huge):
        with pytest.raises(ConfigError) as caught:
            vision.count_prompt_tokens(ask("What is this?", bad).messages)
        assert "\n" not in str(caught.value)


def _pillow_images() -> dict[str, bytes]:
    import io

    pil = pytest.importorskip("PIL.Image")
    out: dict[str, bytes] = {}
    frames = [pil.new("RGB", (32, 24), c) for c in ("red", "blue", "green")]
    buf = io.BytesIO()
    frames[0].save(buf, "GIF", save_all=True, append_images=frames[1:], duration=50, loop=0)
    out["animated.gif"] = buf.getvalue()
    buf = io.BytesIO()
    pil.new("CMYK", (32, 24), (0, 255, 255, 0)).save(buf, "JPEG")
    out["cmyk.jpg"] = buf.getvalue()
    return out


def test_animated_gif_cmyk_jpeg_and_16_bit_png_become_a_picture(vision: Any) -> None:
    images = {**_pillow_images(), "deep.png": png(32, 24, bit_depth=16)}
    for name, data in images.items():
        before = vision.count_prompt_tokens(ask("What is this?").messages)
        after = vision.count_prompt_tokens(ask("What is this?", data).messages)
        assert after - before >= 4, name  # decoded, and took its place in the prompt


def test_a_truncated_png_ends_in_one_line(vision: Any) -> None:
    whole = png(64, 48)
    with pytest.raises(ConfigError) as caught:
        vision.count_prompt_tokens(ask("What is this?", whole[: len(whole) // 2]).messages)
    assert "could not be decoded" in str(caught.value)


def test_the_bench_measures_an_image_turn_and_its_reuse(smollm_path: Path) -> None:
    from tests.bench.images import measure_images

    notes: list[str] = []
    figures = measure_images(smollm_path, 1, notes)
    assert notes == []
    assert figures["image_prefill_ms"] > 0
    assert figures["image_kv_reuse_speedup"] > 0


def test_structured_replies_and_offered_tools_still_work_with_an_image(vision: Any) -> None:
    from engine.events import StructuredValue, TurnDone, TurnError
    from engine.turns.runner import TurnRunner

    schema = {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]}
    question = ask("Which colour is it? Answer in JSON.", png(40, 30, seed=5))
    structured = list(TurnRunner(vision).run(question.with_(schema=schema, max_tokens=24)))
    assert not any(isinstance(e, TurnError) for e in structured), structured[-1]
    assert any(isinstance(e, StructuredValue) for e in structured)
    tools = (
        {
            "type": "function",
            "function": {"name": "now", "description": "the time", "parameters": {"type": "object", "properties": {}}},
        },
    )
    offered = list(TurnRunner(vision).run(question.with_(tools=tools)))
    assert isinstance(offered[-1], TurnDone), offered[-1]


def test_a_stop_after_the_image_is_seen_before_the_text_that_follows(vision: Any) -> None:
    vision.reset_cache()
    cancel = CancelToken()
    info = StreamInfo()
    seen: list[tuple[int, int]] = []
    for item in vision.stream(ask("Describe the picture.", png(40, 30, seed=6)), cancel, info):
        if isinstance(item, PromptProgress):
            seen.append((item.done, item.total))
            if item.done > 0:
                cancel.cancel()  # the image's span is in: the stop comes between chunks
    assert info.finish_reason is FinishReason.CANCELLED and info.completion_tokens == 0
    assert seen[-1][0] < seen[-1][1]  # stopped before the whole prompt was read
    assert 0 < vision.cached_tokens < info.prompt_tokens


def test_more_images_than_the_projector_keeps_and_a_rerun_after_eviction_run(smollm_path: Path, tmp_path: Path) -> None:
    """17+ pictures in one conversation, and a remembered prompt run again after its picture left
    the projector's cache: each span owns its chunk. In a child process, so a native crash (the
    freed chunk this once was) fails the test instead of ending pytest."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "MALLOC_PERTURB_": "165"}  # freed memory is scribbled over, so a stale read shows
    done = subprocess.run(
        [sys.executable, "-m", "tests.vision_eviction_child", str(smollm_path), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("survived")
