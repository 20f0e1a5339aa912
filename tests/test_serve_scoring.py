"""`/v1/completions` as lm-evaluation-harness and OpenAI's clients use it (#51 items 5, 6; #52 S5-57…60):
`echo` with `logprobs` scores the prompt's own tokens, `max_tokens: 0` with `echo` scores without
generating, `text_offset` counts from the prompt's start, `n` > 1 counts the prompt once in `usage`,
and an empty prompt is a 400 naming `prompt`."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gguf_factory as gf
import httpx
import numpy as np
import pytest
from lazy_import import lazy_module
from serve_helpers import Served, serve

from engine.backends.scripted import ScriptedBackend
from engine.llama.llama import LlamaBackend

if TYPE_CHECKING:
    import openai
else:  # imported when a test first uses it: collection stays light (#53)
    openai = lazy_module("openai")


def _tiny(served: list[Served], tmp_path: Path) -> tuple[openai.OpenAI, LlamaBackend]:
    backend = LlamaBackend(gf.write_tiny_llama(tmp_path / "tiny.gguf"), n_ctx=256)
    served.append(serve(backend, max_tokens=8, context_size=256))
    return openai.OpenAI(base_url=served[-1].url, api_key="x", max_retries=0, timeout=60), backend


def _reference(path: Path, ids: list[int]) -> list[float]:
    """Each token's log probability after the ones before it, from llama-cpp-python's own
    `logits_all` evaluation (a second model on the same file)."""
    from llama_cpp import Llama

    llm = Llama(model_path=str(path), n_ctx=256, logits_all=True, verbose=False)
    try:
        llm.eval(ids)
        scores = np.asarray(llm.scores[: len(ids)], dtype=np.float64)
    finally:
        llm.close()
    peak = scores.max(axis=1, keepdims=True)
    norm = peak[:, 0] + np.log(np.exp(scores - peak).sum(axis=1))
    return [float(scores[i, ids[i + 1]] - norm[i]) for i in range(len(ids) - 1)]


@pytest.mark.slow  # loads a (tiny) model through llama.cpp
def test_echo_with_logprobs_scores_the_prompt_without_generating(served: list[Served], tmp_path: Path) -> None:
    """Defect 5: `max_tokens: 0` was a 400 and the prompt's tokens had no logprobs."""
    client, backend = _tiny(served, tmp_path)
    prompt = "hello world"
    reply = client.completions.create(model="tiny", prompt=prompt, max_tokens=0, echo=True, logprobs=2)
    choice = reply.choices[0]
    assert choice.text == prompt and choice.finish_reason == "length"
    assert reply.usage is not None and reply.usage.completion_tokens == 0
    logprobs = choice.logprobs
    assert logprobs is not None and logprobs.tokens and logprobs.token_logprobs and logprobs.text_offset
    ids, _ = backend.prompt_tokens(backend_request(prompt))
    assert len(logprobs.tokens) == len(ids) == reply.usage.prompt_tokens
    assert logprobs.token_logprobs[0] is None and (logprobs.top_logprobs or [])[0] is None
    expected = _reference(backend.path, ids)
    # llama-cpp-python's own `logits_all` run, in other batches: equal to float32 rounding.
    assert all(math.isclose(a, b, abs_tol=1e-3) for a, b in zip(logprobs.token_logprobs[1:], expected, strict=True))
    offsets = [sum(len(t) for t in logprobs.tokens[:i]) for i in range(len(ids))]
    assert logprobs.text_offset == offsets  # the prompt's tokens from 0, one after another
    # Two alternatives each (a dict: two tokens that read alike are one key).
    assert all(1 <= len(top or {}) <= 2 for top in (logprobs.top_logprobs or [])[1:])


@pytest.mark.slow  # loads a (tiny) model through llama.cpp
def test_echo_scores_the_prompt_then_continues_it(served: list[Served], tmp_path: Path) -> None:
    client, backend = _tiny(served, tmp_path)
    ids, _ = backend.prompt_tokens(backend_request("hello"))
    whole = client.completions.create(model="tiny", prompt="hello", max_tokens=3, echo=True, logprobs=1, temperature=0)
    logprobs = whole.choices[0].logprobs
    assert logprobs is not None and logprobs.tokens is not None
    assert whole.usage is not None and len(logprobs.tokens) == len(ids) + whole.usage.completion_tokens
    streamed = client.completions.create(
        model="tiny", prompt="hello", max_tokens=3, echo=True, logprobs=1, temperature=0, stream=True
    )
    chunks = [c.choices[0] for c in streamed if c.choices]
    assert "".join(c.text for c in chunks) == whole.choices[0].text
    tokens = [t for c in chunks if c.logprobs for t in c.logprobs.tokens or []]
    assert tokens == logprobs.tokens


def test_max_tokens_zero_without_echo_is_still_refused(served: list[Served]) -> None:
    served.append(serve(ScriptedBackend.from_texts("never")))
    reply = httpx.post(f"{served[-1].url}/completions", json={"prompt": "a", "max_tokens": 0}, timeout=30)
    assert reply.status_code == 400 and reply.json()["error"]["param"] == "max_tokens"
    assert "echo" in reply.json()["error"]["message"]


@pytest.mark.slow  # loads a (tiny) model through llama.cpp
def test_text_offset_without_echo_starts_after_the_prompt(served: list[Served], tmp_path: Path) -> None:
    """llama-cpp-python's and OpenAI's offsets index prompt + completion; Ember's started at 0."""
    client, _ = _tiny(served, tmp_path)
    reply = client.completions.create(model="tiny", prompt="hello", max_tokens=2, logprobs=0, temperature=0)
    logprobs = reply.choices[0].logprobs
    assert logprobs is not None and logprobs.text_offset and logprobs.text_offset[0] == len("hello")


@pytest.mark.parametrize(
    "body",
    [
        {"prompt": "", "max_tokens": 3},
        {"prompt": "", "max_tokens": 3, "echo": True},
        {"prompt": [""], "max_tokens": 3},
        {"prompt": "", "max_tokens": 3, "stream": True},
    ],
    ids=["plain", "echo", "array", "stream"],
)
def test_an_empty_prompt_is_a_400_naming_prompt(served: list[Served], body: dict[str, Any]) -> None:
    """S5-57…60: a 500 "internal error: an empty prompt" and a traceback in the log (llama_decode
    refused it); now refused before any model sees it."""
    backend = ScriptedBackend.from_texts("never")
    served.append(serve(backend))
    reply = httpx.post(f"{served[-1].url}/completions", json=body, timeout=30)
    assert reply.status_code == 400 and reply.json()["error"]["param"] == "prompt"
    assert backend.requests == []


def test_n_choices_count_the_prompt_once(served: list[Served]) -> None:
    """Defect 6: `prompt_tokens` was the prompt times `n`."""
    served.append(serve(ScriptedBackend.from_texts("a b", "c d", "e f", "g h")))
    client = openai.OpenAI(base_url=served[-1].url, api_key="x", max_retries=0, timeout=30)
    reply = client.chat.completions.create(
        model="default", messages=[{"role": "user", "content": "Name three colors."}], n=3
    )
    assert len(reply.choices) == 3 and reply.usage is not None
    one = client.chat.completions.create(model="default", messages=[{"role": "user", "content": "Name three colors."}])
    assert one.usage is not None and reply.usage.prompt_tokens == one.usage.prompt_tokens > 0
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens


def backend_request(prompt: str) -> Any:
    from engine.backends.base import Request

    return Request((), prompt=prompt)
