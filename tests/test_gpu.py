"""The engine on a GPU: offload, the same greedy reply as the CPU's, cancel, grammar (pytest -m gpu).

Skipped unless this llama.cpp build can offload to a device here (`ember doctor` says which);
`packaging/gpu-check.sh` runs them on a GPU machine. The synthetic model in /tmp/syn135.gguf
(SmolLM2-135M's shape, written by the GPU kit) is used when present.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.backends.base import Sampling, StreamInfo, make_request
from engine.cancel import CancelToken
from engine.events import Piece
from engine.llama import llama_devices
from engine.llama.llama import LlamaBackend

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not llama_devices.gpu_offload_supported(), reason="this llama.cpp build cannot offload here"),
]

SYN135 = Path(os.environ.get("EMBER_GPU_SYN_MODEL", "/tmp/syn135.gguf"))
HELLO = [{"role": "user", "content": "Say hello."}]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from gguf_factory import write_tiny_llama  # tests/ is on the path (a `tests` package may shadow it there)

    return write_tiny_llama(tmp_path_factory.mktemp("gpu") / "tiny.gguf", n_layer=4, n_embd=128, n_ff=256)


@pytest.fixture(scope="module")
def on_gpu(tiny: Path) -> Iterator[LlamaBackend]:
    backend = LlamaBackend(tiny, n_ctx=2048)  # the default: as many layers as fit
    yield backend
    backend.close()


def _greedy(
    backend: LlamaBackend,
    messages=HELLO,
    max_tokens: int = 16,
    grammar: str | None = None,  # type: ignore[no-untyped-def]
    cancel_after: int | None = None,
) -> tuple[list[int | None], str, StreamInfo]:
    request = make_request(messages, sampling=Sampling.greedy(), max_tokens=max_tokens).with_(grammar=grammar)
    cancel, info = CancelToken(), StreamInfo()
    ids: list[int | None] = []
    text: list[str] = []
    for piece in backend.stream(request, cancel, info):
        if not isinstance(piece, Piece):
            continue  # prompt progress
        ids.append(piece.token_id)
        text.append(piece.text)
        if cancel_after is not None and len(ids) == cancel_after:
            cancel.cancel()
    return ids, "".join(text), info


def test_a_model_loads_with_every_layer_on_the_gpu(on_gpu: LlamaBackend) -> None:
    assert on_gpu.where.startswith(("GPU · CUDA · 4/4 layers · ", "GPU · Vulkan · 4/4 layers · ")), on_gpu.where
    assert on_gpu.n_gpu_layers == 4 and on_gpu.gpu_note == ""


def test_the_greedy_reply_is_the_cpus(tiny: Path, on_gpu: LlamaBackend) -> None:
    cpu = LlamaBackend(tiny, n_ctx=2048, n_gpu_layers=0)
    try:
        assert cpu.where.startswith("CPU")
        expected, _, cpu_info = _greedy(cpu)
    finally:
        cpu.close()
    got, _, info = _greedy(on_gpu)
    assert cpu_info.completion_tokens > 0
    assert got == expected and info.completion_tokens == cpu_info.completion_tokens


def test_cancel_takes_effect_within_one_token_on_the_gpu(on_gpu: LlamaBackend) -> None:
    ids, _, info = _greedy(on_gpu, max_tokens=64, cancel_after=3, grammar="root ::= [a-z]+")
    assert len(ids) == 3 and info.finish_reason == "cancelled"
    again, _, _ = _greedy(on_gpu, max_tokens=4, grammar="root ::= [a-z]+")
    assert len(again) > 0  # the model is still usable


def test_a_stop_between_prompt_batches_on_the_gpu(on_gpu: LlamaBackend) -> None:
    long_prompt = [{"role": "user", "content": "a b " * 400}]
    request = make_request(long_prompt, sampling=Sampling.greedy(), max_tokens=4)
    assert 1024 < len(on_gpu.prompt_tokens(request)[0]) < 2000  # three batches of 512
    on_gpu.reset_cache()
    cancel = CancelToken()
    cancel.cancel()
    info = StreamInfo()
    assert list(on_gpu.stream(request, cancel, info)) == [] and info.finish_reason == "cancelled"
    assert on_gpu.cached_tokens <= 512  # at most the first batch was evaluated


def test_a_grammar_shapes_the_reply_on_the_gpu(on_gpu: LlamaBackend) -> None:
    _, text, info = _greedy(on_gpu, max_tokens=8, grammar='root ::= ("yes" | "no") "."')
    assert text in ("yes.", "no.") and info.finish_reason == "stop"


@pytest.mark.skipif(not SYN135.is_file(), reason="no synthetic SmolLM2-135M-shaped model (the GPU kit writes one)")
def test_a_real_sized_model_goes_wholly_to_the_gpu() -> None:
    backend = LlamaBackend(SYN135, n_ctx=4096)
    try:
        assert backend.where.startswith(("GPU · CUDA · 30/30 layers · ", "GPU · Vulkan · 30/30 layers · ")), (
            backend.where
        )
        ids, _, _ = _greedy(backend, max_tokens=8)
        assert len(ids) > 0
    finally:
        backend.close()
