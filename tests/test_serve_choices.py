"""`logprobs`/`top_logprobs`, `n` and OpenAI's penalties on `/v1/chat/completions` (#40 item 4)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from lazy_import import lazy_module
from serve_helpers import Served, serve

from engine.backends.base import Capabilities, PlainBackend, Request, StreamInfo
from engine.cancel import CancelToken
from engine.events import Piece, TokenLogprob

if TYPE_CHECKING:
    import openai
else:  # imported when a test first uses it: collection stays light (#53)
    openai = lazy_module("openai")

HI: Any = [{"role": "user", "content": "hi"}]


def _entry(text: str, logprob: float, top: int) -> TokenLogprob:
    data = tuple(text.encode())
    alternatives = (TokenLogprob(text, data, logprob), TokenLogprob("x", (120,), logprob - 1.0))
    return TokenLogprob(text, data, logprob, alternatives[:top])


class ProbingBackend(PlainBackend):
    """Answers "Hello world" in two pieces carrying log probabilities when asked; records requests."""

    capabilities = Capabilities(device="Scripted")

    def __init__(self) -> None:
        self.name = "probe"
        self.requests: list[Request] = []

    def stream(self, request: Request, cancel: CancelToken, info: StreamInfo) -> Iterator[Piece]:
        self.requests.append(request)
        top = request.logprobs
        for text, logprob in (("Hello", -0.25), (" world", -0.5)):
            yield Piece(text, logprobs=(_entry(text, logprob, top),) if top is not None else ())
        info.finish_reason = "stop"
        info.completion_tokens = 2

    def close(self) -> None:
        pass


def _client(served: list[Served]) -> tuple[openai.OpenAI, ProbingBackend]:
    backend = ProbingBackend()
    served.append(serve(backend))
    return openai.OpenAI(base_url=served[-1].url, api_key="x", max_retries=0, timeout=30), backend


def test_logprobs_in_openai_shape(served: list[Served]) -> None:
    client, backend = _client(served)
    reply = client.chat.completions.create(model="m", messages=HI, logprobs=True, top_logprobs=2)
    logprobs = reply.choices[0].logprobs
    assert logprobs is not None and logprobs.content is not None
    assert [(t.token, t.logprob, t.bytes) for t in logprobs.content] == [
        ("Hello", -0.25, list(b"Hello")),
        (" world", -0.5, list(b" world")),
    ]
    assert [a.token for a in logprobs.content[0].top_logprobs] == ["Hello", "x"]
    assert backend.requests[0].logprobs == 2


def test_logprobs_streamed_come_with_their_chunks(served: list[Served]) -> None:
    client, _ = _client(served)
    chunks = list(client.chat.completions.create(model="m", messages=HI, logprobs=True, stream=True))
    tokens = [
        t.token
        for c in chunks
        if c.choices and c.choices[0].logprobs and c.choices[0].logprobs.content
        for t in c.choices[0].logprobs.content
    ]
    assert tokens == ["Hello", " world"]
    assert all(
        not t.top_logprobs
        for c in chunks
        if c.choices and c.choices[0].logprobs
        for t in c.choices[0].logprobs.content or []
    )  # top_logprobs not asked: none


def test_without_logprobs_none_are_computed(served: list[Served]) -> None:
    client, backend = _client(served)
    reply = client.chat.completions.create(model="m", messages=HI)
    assert reply.choices[0].logprobs is None and backend.requests[0].logprobs is None


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
        ({"top_logprobs": 3}, "top_logprobs"),
        ({"n": 9}, "n"),
        ({"frequency_penalty": 2.5}, "frequency_penalty"),
    ],
)
def test_out_of_range_fields_are_400s(served: list[Served], body: dict[str, Any], param: str) -> None:
    _client(served)
    reply = httpx.post(f"{served[-1].url}/chat/completions", json={"messages": HI, **body}, timeout=30)
    assert reply.status_code == 400 and reply.json()["error"]["param"] == param


def test_n_choices_run_one_after_another_with_derived_seeds(served: list[Served]) -> None:
    client, backend = _client(served)
    reply = client.chat.completions.create(model="m", messages=HI, n=3, seed=41)
    assert [c.index for c in reply.choices] == [0, 1, 2]
    assert all(c.message.content == "Hello world" for c in reply.choices)
    assert [r.sampling.seed for r in backend.requests] == [41, 42, 43]
    assert reply.usage is not None and reply.usage.completion_tokens == 6


def test_n_choices_streamed(served: list[Served]) -> None:
    client, _ = _client(served)
    chunks = list(
        client.chat.completions.create(model="m", messages=HI, n=2, stream=True, stream_options={"include_usage": True})
    )
    texts = ["", ""]
    finishes: list[int] = []
    for chunk in chunks:
        for choice in chunk.choices:
            texts[choice.index] += choice.delta.content or ""
            if choice.finish_reason:
                finishes.append(choice.index)
    assert texts == ["Hello world", "Hello world"] and finishes == [0, 1]
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 4


def test_penalties_reach_the_sampler(served: list[Served]) -> None:
    client, backend = _client(served)
    client.chat.completions.create(model="m", messages=HI, frequency_penalty=0.5, presence_penalty=-1.0)
    sampling = backend.requests[0].sampling
    assert (sampling.frequency_penalty, sampling.presence_penalty) == (0.5, -1.0)


class ThinkingProbe(ProbingBackend):
    """Thinks, then answers "Hello world": every token carries its log probability."""

    SCRIPT = (("<think>", True), ("Let me see", False), ("</think>", True), ("Hello", False), (" world", False))

    def stream(self, request: Request, cancel: CancelToken, info: StreamInfo) -> Iterator[Piece]:
        for i, (text, special) in enumerate(self.SCRIPT):
            yield Piece(text, special=special, logprobs=(_entry(text, -0.1 * (i + 1), 0),))
        info.finish_reason = "stop"


def test_logprobs_cover_the_content_not_the_thinking(served: list[Served]) -> None:
    served.append(serve(ThinkingProbe()))
    client = openai.OpenAI(base_url=served[-1].url, api_key="x", max_retries=0, timeout=30)
    reply = client.chat.completions.create(model="m", messages=HI, logprobs=True)
    message: Any = reply.choices[0].message
    assert message.content == "Hello world" and message.reasoning_content == "Let me see"
    logprobs = reply.choices[0].logprobs
    assert logprobs is not None and [t.token for t in logprobs.content or []] == ["Hello", " world"]
