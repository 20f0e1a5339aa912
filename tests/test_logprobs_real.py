"""Log probabilities on the real built-in model: the model's own softmax over its logits."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from lazy_import import lazy_module
from serve_helpers import serve

from engine.backends.base import Message, Request, Sampling, StreamInfo
from engine.cancel import CancelToken
from engine.events import Piece, TokenLogprob
from engine.llama.llama import LlamaBackend

if TYPE_CHECKING:
    import openai
else:  # imported when a test first uses it: collection stays light (#53)
    openai = lazy_module("openai")

MESSAGES: tuple[Message, ...] = ({"role": "user", "content": "Name three colors."},)


def softmax_reference(path: Path, prompt: list[int], reply: list[int]) -> list[np.ndarray]:
    """Log-softmax rows from a separate llama-cpp-python `Llama` that keeps every position's logits."""
    import llama_cpp

    llm = llama_cpp.Llama(str(path), n_ctx=512, logits_all=True, verbose=False, flash_attn=True)
    try:
        llm.eval(prompt + reply)
        rows: list[np.ndarray] = []
        for i in range(len(reply)):
            logits = np.asarray(llm.scores[len(prompt) - 1 + i], dtype=np.float64)
            rows.append(logits - (logits.max() + np.log(np.exp(logits - logits.max()).sum())))
        return rows
    finally:
        llm.close()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_logprobs_are_the_models_softmax(smollm: LlamaBackend, smollm_path: Path) -> None:
    request = Request(MESSAGES, sampling=Sampling.greedy(), max_tokens=6, logprobs=5, verbatim=True)
    pieces = [p for p in smollm.stream(request, CancelToken(), StreamInfo()) if isinstance(p, Piece)]
    entries = [e for p in pieces for e in p.logprobs]
    ids = [p.token_id for p in pieces if p.token_id is not None]
    assert len(entries) == len(ids) == 6
    rows = softmax_reference(smollm_path, smollm.prompt_tokens(request)[0], [int(i) for i in ids])
    for entry, row, token in zip(entries, rows, ids, strict=True):
        assert entry.logprob == pytest.approx(row[token], abs=0.05)
        assert len(entry.top) == 5 and entry.top[0].logprob >= entry.top[-1].logprob
        assert entry.top[0].bytes == entry.bytes  # greedy: the chosen token is the most likely
        expected = sorted(row, reverse=True)[:5]
        assert [t.logprob for t in entry.top] == pytest.approx(expected, abs=0.05)
    text = b"".join(bytes(e.bytes) for e in entries).decode()
    assert text == "".join(p.text for p in pieces)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_openai_penalties_as_openai_defines_them(smollm: LlamaBackend) -> None:
    """Greedy under penalties picks argmax(logit - count·frequency - [count > 0]·presence) over the reply so far."""
    frequency, presence = 2.0, 2.0
    sampling = Sampling(
        temperature=0.0,
        top_k=1,
        top_p=1.0,
        min_p=0.0,
        repeat_penalty=1.0,
        seed=0,
        frequency_penalty=frequency,
        presence_penalty=presence,
    )
    messages: tuple[Message, ...] = ({"role": "user", "content": "Write a short poem about the sea."},)
    request = Request(messages, sampling=sampling, max_tokens=32, logprobs=20, verbatim=True)
    entries = [
        e for p in smollm.stream(request, CancelToken(), StreamInfo()) if isinstance(p, Piece) for e in p.logprobs
    ]
    counts: dict[tuple[int, ...], int] = {}
    passed_over = 0
    for entry in entries:

        def adjusted(t: TokenLogprob) -> float:
            n = counts.get(t.bytes, 0)
            return t.logprob - n * frequency - (presence if n else 0.0)

        assert adjusted(entry) >= max(adjusted(t) for t in entry.top) - 1e-4
        passed_over += entry.bytes != entry.top[0].bytes
        counts[entry.bytes] = counts.get(entry.bytes, 0) + 1
    assert passed_over > 0  # the penalty changed at least one choice: it is applied, not ignored


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_the_api_reports_the_backends_logprobs(smollm_path: Path) -> None:
    backend = LlamaBackend(smollm_path, n_ctx=2048)
    request = Request(MESSAGES, sampling=Sampling.greedy(), max_tokens=6, logprobs=3, verbatim=True)
    direct = [
        e for p in backend.stream(request, CancelToken(), StreamInfo()) if isinstance(p, Piece) for e in p.logprobs
    ]
    s = serve(backend, max_tokens=6, context_size=2048)
    try:
        client = openai.OpenAI(base_url=s.url, api_key="x", max_retries=0, timeout=120)
        kwargs: Any = {
            "model": "m",
            "messages": list(MESSAGES),
            "temperature": 0,
            "max_tokens": 6,
            "logprobs": True,
            "top_logprobs": 3,
        }
        reply = client.chat.completions.create(**kwargs)
        assert reply.choices[0].logprobs is not None and reply.choices[0].logprobs.content is not None
        whole = reply.choices[0].logprobs.content
        chunks = list(client.chat.completions.create(**kwargs, stream=True))
        streamed = [
            t for c in chunks if c.choices and c.choices[0].logprobs for t in c.choices[0].logprobs.content or []
        ]
        for got in (whole, streamed):
            assert [t.token for t in got] == [e.token for e in direct]
            assert [t.logprob for t in got] == pytest.approx([e.logprob for e in direct], abs=0.05)
            assert [len(t.top_logprobs) for t in got] == [3] * len(direct)
    finally:
        s.close()
