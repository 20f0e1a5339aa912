"""A second real model, Gemma 3 270M (Q4_K_M), used as a user's own file.

It is the base model, with no chat template and no sign of instruction tuning in its
names, so it is prompted as a plain transcript: it answers, the reply ends at the next
`User:` line, no turn marker leaks, greedy replies repeat, and `ember chat` says once that
it is a base model. llama.cpp's built-in gemma format, which a template-less *instruction*
file would get, renders over its vocabulary with control tokens (measured here: the base
model prompted in it echoes the question and junk to the token limit).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.backends.base import Sampling, StreamInfo, make_request
from engine.cancel import CancelToken
from engine.events import FinishReason, Piece
from engine.llama.builtin_template import BuiltinTemplate
from engine.llama.llama import LlamaBackend
from models.gguf.builtin_templates import BASE_MODEL_NOTE, FORMATS
from models.gguf.header import read_header
from models.gguf.meta import _builtin_template, read_metadata  # pyright: ignore[reportPrivateUsage]

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
LEAKS = ("<end_of_turn>", "<start_of_turn>", "<|im_end|>", "<|im_start|>")
MAX_TOKENS = 64


@pytest.fixture(scope="module")
def gemma(gemma_path: Path) -> Iterator[LlamaBackend]:
    backend = LlamaBackend(gemma_path, n_ctx=1024)
    yield backend
    backend.close()


def _reply(backend: LlamaBackend, messages: list[dict[str, str]]) -> tuple[str, StreamInfo]:
    info = StreamInfo()
    request = make_request(messages, sampling=Sampling.greedy(), max_tokens=MAX_TOKENS)
    text = "".join(p.text for p in backend.stream(request, CancelToken(), info) if isinstance(p, Piece))
    return text, info


def test_it_is_a_base_model_prompted_as_a_transcript(gemma_path: Path, gemma: LlamaBackend) -> None:
    meta = read_metadata(gemma_path)
    assert (meta.architecture, meta.chat_template, meta.base_model, meta.builtin_template) == (
        "gemma3",
        None,
        True,
        None,
    )
    ids, _ = gemma.prompt_tokens(make_request(QUESTION))
    assert gemma.raw().detokenize(ids, special=True).decode() == "<bos>User: What is the capital of France?\nAssistant:"


def test_the_builtin_gemma_format_renders_with_control_tokens(gemma_path: Path, gemma: LlamaBackend) -> None:
    """What an instruction-tuned Gemma without a template gets: its vocabulary qualifies, and the
    markers are one control token each, the question plain text."""
    assert _builtin_template(read_header(gemma_path), "gemma3") == "gemma"
    template = BuiltinTemplate(FORMATS["gemma"])
    ids = [t for seg in template.segments(QUESTION) for t in gemma._tokenize(seg)]  # pyright: ignore[reportPrivateUsage]
    llm = gemma.raw()
    assert llm.detokenize(ids, special=True).decode() == (
        "<start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n"
    )
    start, end = (llm.tokenize(t, add_bos=False, special=True) for t in (b"<start_of_turn>", b"<end_of_turn>"))
    assert len(start) == len(end) == 1 and ids.count(start[0]) == 2 and ids.count(end[0]) == 1
    assert gemma._classes.classify(end[0])[0]  # pyright: ignore[reportPrivateUsage]  (end of generation)


def test_greedy_replies_answer_stop_early_and_leak_no_markers(gemma: LlamaBackend) -> None:
    first, info = _reply(gemma, QUESTION)
    assert "Paris" in first and first == first.strip(), first
    assert info.finish_reason == FinishReason.STOP and info.completion_tokens < MAX_TOKENS, (first, info)
    assert not any(marker in first for marker in LEAKS), first
    again, _ = _reply(gemma, QUESTION)
    assert again == first
    follow_up = [*QUESTION, {"role": "assistant", "content": first}, {"role": "user", "content": "And of Italy?"}]
    second, info = _reply(gemma, follow_up)
    assert info.finish_reason == FinishReason.STOP and info.completion_tokens < MAX_TOKENS, (second, info)
    assert second.strip() and not any(marker in second for marker in LEAKS), second


def test_ember_chat_says_once_that_it_is_a_base_model(gemma_path: Path, ember_home: Path) -> None:
    env = {**os.environ, "EMBER_HOME": str(ember_home)}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "desktop",
            "chat",
            "--model",
            str(gemma_path),
            "--temperature",
            "0",
            "--max-tokens",
            str(MAX_TOKENS),
            "--ctx",
            "1024",
            "What is the capital of France?",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.count(BASE_MODEL_NOTE) == 1, result.stderr
    assert result.stdout.strip() and not any(marker in result.stdout for marker in LEAKS), result.stdout
