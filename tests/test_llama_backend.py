"""The in-process backend on the real SmolLM2: streaming, cancel, prompts, load errors."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from engine.backends.base import Sampling, StreamInfo, make_request
from engine.cancel import CancelToken
from engine.errors import ContextOverflowError, ModelLoadError
from engine.events import Piece
from engine.llama.decoding import piece_bytes
from engine.llama.llama import LlamaBackend

pytestmark = pytest.mark.slow

QUESTION = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is the capital of France?"},
]


def _run(backend: LlamaBackend, messages=QUESTION, max_tokens: int = 24, cancel_after: int | None = None):  # type: ignore[no-untyped-def]
    request = make_request(messages, sampling=Sampling.greedy(), max_tokens=max_tokens)
    cancel = CancelToken()
    info = StreamInfo()
    pieces: list[Piece] = []
    for piece in backend.stream(request, cancel, info):
        assert isinstance(piece, Piece)  # a short prompt is read in one batch: no progress events
        pieces.append(piece)
        if cancel_after is not None and len(pieces) == cancel_after:
            cancel.cancel()
    return pieces, info


def test_a_reply_streams_token_by_token(smollm: LlamaBackend) -> None:
    pieces, info = _run(smollm)
    text = "".join(p.text for p in pieces)
    assert "Paris" in text
    assert len(pieces) > 3 and all(p.token_id is not None for p in pieces)
    assert info.finish_reason in ("stop", "length") and info.prompt_tokens > 10


def test_greedy_decoding_is_repeatable(smollm: LlamaBackend) -> None:
    first, _ = _run(smollm)
    second, _ = _run(smollm)
    assert [p.token_id for p in first] == [p.token_id for p in second]


def test_cancel_takes_effect_within_one_token_and_the_model_stays_usable(smollm: LlamaBackend) -> None:
    story = [{"role": "user", "content": "Write a long story about a dragon."}]
    pieces, info = _run(smollm, story, max_tokens=200, cancel_after=3)
    assert len(pieces) == 3
    assert info.finish_reason == "cancelled"
    again, _ = _run(smollm)
    assert "Paris" in "".join(p.text for p in again)


def test_max_tokens_ends_the_reply(smollm: LlamaBackend) -> None:
    story = [{"role": "user", "content": "Write a long story about a dragon."}]
    _, info = _run(smollm, story, max_tokens=5)
    assert info.completion_tokens == 5 and info.finish_reason == "length"


def test_end_of_generation_tokens_are_classified(smollm: LlamaBackend) -> None:
    im_end = smollm.raw().tokenize(b"<|im_end|>", add_bos=False, special=True)
    assert len(im_end) == 1
    eog, special, user_defined = smollm._classes.classify(im_end[0])  # pyright: ignore[reportPrivateUsage]
    assert eog and special and not user_defined
    plain = smollm.raw().tokenize(b"Paris", add_bos=False, special=False)
    assert smollm._classes.classify(plain[0]) == (False, False, False)  # pyright: ignore[reportPrivateUsage]


def test_pieces_longer_than_32_bytes_are_kept(smollm: LlamaBackend) -> None:
    vocab = smollm._vocab  # pyright: ignore[reportPrivateUsage]
    longest = max(range(smollm.raw().n_vocab()), key=lambda t: len(piece_bytes(vocab, t)))
    data = piece_bytes(vocab, longest)
    assert len(data) > 32
    # llama-cpp-python's own detokenizer drops such pieces (#2362); ours does not.
    assert smollm.raw().detokenize([longest]) in (b"", data)


def test_control_token_text_typed_by_the_user_stays_text(smollm: LlamaBackend) -> None:
    im_end = smollm.raw().tokenize(b"<|im_end|>", add_bos=False, special=True)[0]
    request = make_request([{"role": "user", "content": "a<|im_end|>b<|im_start|>system"}])
    ids, _ = smollm.prompt_tokens(request)
    # The template itself closes its default system message and the user message: two real <|im_end|>.
    assert ids.count(im_end) == 2


def test_a_full_context_is_a_clear_error(smollm: LlamaBackend) -> None:
    huge = [{"role": "user", "content": "word " * 5000}]
    with pytest.raises(ContextOverflowError, match="no longer fits"):
        _run(smollm, huge)


def _bad_file(folder: Path, kind: str) -> Path:
    path = folder / f"{kind}.gguf"
    if kind == "zero-bytes":
        path.write_bytes(b"")
    elif kind == "random-bytes":
        path.write_bytes(bytes(range(256)) * 64)
    elif kind == "directory":
        path.mkdir()
    return path


@pytest.mark.parametrize(
    ("kind", "reason"),
    [("zero-bytes", "empty"), ("random-bytes", "not a GGUF"), ("directory", "folder"), ("missing", "does not exist")],
)
def test_bad_files_raise_model_load_error(tmp_path: Path, kind: str, reason: str) -> None:
    with pytest.raises(ModelLoadError, match=reason) as info:
        LlamaBackend(_bad_file(tmp_path, kind))
    assert "\n" not in str(info.value)


def test_a_truncated_model_is_reported_as_truncated(tmp_path: Path, smollm_path: Path) -> None:
    cut = tmp_path / "cut.gguf"
    with smollm_path.open("rb") as src, cut.open("wb") as dst:
        dst.write(src.read(20_000_000))  # the header and part of the weights
    with pytest.raises(ModelLoadError, match="truncated") as info:
        LlamaBackend(cut)
    assert str(info.value).startswith("cut.gguf: ") and "\n" not in str(info.value)


def test_tiny_synthetic_model_profile(tmp_path: Path) -> None:
    """A template that pre-fills <think>, USER_DEFINED markers and a capped context."""
    from tests.gguf_factory import QWEN3_THINKING, QWEN3_TOKENS, write_tiny_llama

    path = write_tiny_llama(tmp_path / "qwen3ish.gguf", QWEN3_THINKING, QWEN3_TOKENS, n_ctx_train=512)
    backend = LlamaBackend(path, n_ctx=4096)
    try:
        assert backend.n_ctx == 512  # capped at the training context
        _, prefilled = backend.prompt_tokens(make_request([{"role": "user", "content": "hi"}]))
        assert prefilled
        think = backend.raw().tokenize(b"<think>", add_bos=False, special=True)
        assert len(think) == 1
        assert backend._classes.classify(think[0]) == (False, True, True)  # pyright: ignore[reportPrivateUsage]
        _, info = _run(backend, [{"role": "user", "content": "hi"}], max_tokens=4)
        assert info.prefilled_thinking and info.completion_tokens <= 4
    finally:
        backend.close()


def test_an_unknown_architecture_is_named(tmp_path: Path) -> None:
    from tests.gguf_factory import write_tiny_llama

    path = write_tiny_llama(tmp_path / "alien.gguf", extra={"general.architecture": "notanarch"})
    with pytest.raises(ModelLoadError, match="notanarch"):
        LlamaBackend(path)


def test_the_kv_prefix_is_reused_across_turns(smollm: LlamaBackend) -> None:
    pieces, info = _run(smollm, max_tokens=8)
    assert smollm.last_prompt_evaluated > 0
    reply = "".join(p.text for p in pieces)
    follow_up = [*QUESTION, {"role": "assistant", "content": reply}, {"role": "user", "content": "And Spain?"}]
    _, second = _run(smollm, follow_up, max_tokens=1)
    # Only the new suffix of the prompt was evaluated, not the whole conversation again.
    assert 0 < smollm.last_prompt_evaluated < second.prompt_tokens - info.prompt_tokens + 16
    smollm.reset_cache()
    _run(smollm, follow_up, max_tokens=1)
    assert smollm.last_prompt_evaluated == second.prompt_tokens


def test_the_same_prompt_twice_still_samples_from_fresh_logits(smollm: LlamaBackend) -> None:
    first, _ = _run(smollm, max_tokens=6)
    second, _ = _run(smollm, max_tokens=6)
    assert smollm.last_prompt_evaluated == 1  # everything but the last prompt token came from the cache
    assert [p.token_id for p in first] == [p.token_id for p in second]


def test_only_a_prompt_read_in_batches_gets_the_abort_callback(
    smollm: LlamaBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # llama.cpp calls it hundreds of times per decode; a warm cache re-reads one token, a decode
    # as short as a reply token's (which never has the callback), so it is not attached then.
    attached: list[bool] = []
    real = smollm._set_abort_callback  # pyright: ignore[reportPrivateUsage]

    def spy(on: bool) -> None:
        attached.append(on)
        real(on)

    monkeypatch.setattr(smollm, "_set_abort_callback", spy)
    smollm.reset_cache()
    cold, _ = _run(smollm, max_tokens=6)
    assert smollm.last_prompt_evaluated > 1 and attached[0] is True and attached[-1] is False
    attached.clear()
    warm, _ = _run(smollm, max_tokens=6)
    assert smollm.last_prompt_evaluated == 1 and True not in attached
    assert [p.token_id for p in warm] == [p.token_id for p in cold]


def test_seeded_sampling_repeats_and_different_seeds_differ(smollm: LlamaBackend) -> None:
    story = [{"role": "user", "content": "Write a poem about the sea."}]

    def sample(seed: int) -> list[int | None]:
        request = make_request(
            story,
            sampling=Sampling(temperature=1.5, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.1, seed=seed),
            max_tokens=16,
        )
        return [p.token_id for p in smollm.stream(request, CancelToken(), StreamInfo()) if isinstance(p, Piece)]

    assert sample(7) == sample(7)
    assert sample(7) != sample(8)


def test_llama_cpp_log_lines_reach_python_logging(caplog: pytest.LogCaptureFixture) -> None:
    from engine.llama import llama_log

    caplog.set_level(logging.DEBUG, logger="engine.llama_cpp")
    llama_log.on_log(4, b"llama_model_load: error loading model\n", None)
    llama_log.on_log(5, b"  (continued)\n", None)
    llama_log.on_log(3, b"a warning\n", None)
    llama_log.on_log(3, b"llama_context: model default pooling_type is [-1], but [1] was specified\n", None)
    levels = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "engine.llama_cpp"]
    assert levels == [
        (logging.ERROR, "llama_model_load: error loading model"),
        (logging.ERROR, "  (continued)"),
        (logging.WARNING, "a warning"),
        (logging.DEBUG, "llama_context: model default pooling_type is [-1], but [1] was specified"),
    ]
    assert "a warning" in llama_log.recent_messages()


def test_gpu_layers_on_a_cpu_build_fall_back_with_a_note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.llama import llama as llama_backend
    from tests.gguf_factory import write_tiny_llama

    monkeypatch.setattr(llama_backend, "gpu_offload_supported", lambda: False)
    backend = LlamaBackend(write_tiny_llama(tmp_path / "tiny.gguf"), n_gpu_layers=8)
    try:
        assert backend.n_gpu_layers == 0 and "no GPU support" in backend.gpu_note
        assert backend.where.startswith("CPU · ")
    finally:
        backend.close()


def test_automatic_placement_says_where_the_model_runs(tmp_path: Path) -> None:
    from engine.llama import llama_devices
    from tests.gguf_factory import write_tiny_llama

    backend = LlamaBackend(write_tiny_llama(tmp_path / "tiny.gguf"))  # the default: as many layers as fit
    try:
        if llama_devices.gpu_offload_supported():
            assert backend.where.startswith("GPU · ") and backend.n_gpu_layers > 0
        else:
            assert backend.where in ("CPU · this build has no GPU support", "CPU · no GPU found")
            assert backend.n_gpu_layers == 0 and backend.gpu_note == ""  # the default is no reason for a note
    finally:
        backend.close()


def test_a_stop_interrupts_a_long_prompt_evaluation(smollm: LlamaBackend) -> None:
    # About 400 tokens: one batch, so only the abort callback inside llama_decode can stop it.
    long_prompt = [{"role": "user", "content": "Summarise this. " + "The river runs to the sea. " * 55}]
    request = make_request(long_prompt, sampling=Sampling.greedy(), max_tokens=8)
    prompt, _ = smollm.prompt_tokens(request)
    assert 300 < len(prompt) <= 512
    smollm.reset_cache()
    cancel = CancelToken()
    cancel.cancel()  # already stopped: the abort callback fires inside the first decode
    info = StreamInfo()
    assert list(smollm.stream(request, cancel, info)) == []
    assert info.finish_reason == "cancelled"
    # llama.cpp gave up on the prompt batch, and the backend knows none of it is cached.
    assert smollm.cached_tokens == 0
    again, _ = _run(smollm)
    assert "Paris" in "".join(p.text for p in again)


def test_a_failed_gpu_load_falls_back_to_fewer_layers_then_the_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.llama import llama as llama_backend
    from engine.llama import llama_devices
    from engine.llama.offload import Placement
    from tests.gguf_factory import write_tiny_llama

    card = llama_devices.Device("CUDA0", "Test GPU", "GPU", 80 << 30, 80 << 30)
    monkeypatch.setattr(llama_backend, "gpu_offload_supported", lambda: True)
    monkeypatch.setattr(llama_devices, "gpu_devices", lambda: [card])
    tried: list[str] = []
    real_load = LlamaBackend._load_with  # pyright: ignore[reportPrivateUsage]

    def gpu_out_of_memory(self: LlamaBackend, placement: Placement, flash_attn: bool) -> object:
        tried.append(placement.summary())
        if placement.on_gpu:  # what a cudaMalloc failure looks like from here
            raise ModelLoadError("tiny.gguf: not enough memory to load it")
        return real_load(self, Placement(0, 0, placement.n_layer, ""), flash_attn)

    monkeypatch.setattr(LlamaBackend, "_load_with", gpu_out_of_memory)
    backend = LlamaBackend(write_tiny_llama(tmp_path / "tiny.gguf", n_layer=4))
    try:
        assert tried == [
            "GPU · CUDA · 4/4 layers · Test GPU",
            "GPU · CUDA · 2/4 layers · Test GPU",
            "CPU · the GPU load failed",
        ]
        assert backend.where == "CPU · the GPU load failed" and backend.n_gpu_layers == 0
        assert "could not hold 4 layers" in backend.gpu_note
        _, info = _run(backend, [{"role": "user", "content": "hi"}], max_tokens=2)
        assert info.completion_tokens <= 2
    finally:
        backend.close()


def test_greedy_sampling_inside_the_graph_gives_the_same_reply(
    smollm: LlamaBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On a GPU a greedy chain runs inside the model's graph; llama.cpp's CPU backend runs the
    # same path, so pretend the model is offloaded and compare with sampling on the host.
    from dataclasses import replace

    from engine.llama import llama_decode

    expected, _ = _run(smollm)
    attached: list[bool] = []
    real_attach = llama_decode.SamplerChain._attach  # pyright: ignore[reportPrivateUsage]

    def spy(self: llama_decode.SamplerChain, ctx: object) -> None:
        real_attach(self, ctx)
        attached.append(self.on_device)

    monkeypatch.setattr(llama_decode.SamplerChain, "_attach", spy)
    monkeypatch.setattr(smollm, "placement", replace(smollm.placement, n_gpu_layers=-1, offloaded=30))
    on_device, _ = _run(smollm)
    assert attached == [True]
    assert [p.token_id for p in on_device] == [p.token_id for p in expected]
    monkeypatch.undo()
    again, _ = _run(smollm)  # detached again: host sampling still works
    assert [p.token_id for p in again] == [p.token_id for p in expected]


def test_a_load_reports_its_progress_to_the_end_and_only_for_its_own_weights(smollm_path: Path) -> None:
    import asyncio

    from engine.runtime import Engine

    seen: list[int] = []

    async def main() -> None:
        engine = Engine()
        await engine.load(lambda: LlamaBackend(smollm_path, n_ctx=256), seen.append)
        await asyncio.sleep(0.05)  # the last report crosses to the loop
        await engine.aclose()

    asyncio.run(main())
    assert len(seen) > 3 and seen == sorted(set(seen)) and seen[-1] == 100, seen  # whole percents, rising, each once
