"""`POST /v1/completions` (a raw prompt, `suffix` for fill-in-the-middle) and `GET /v1/models/{id}` (#40)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import gguf_factory as gf
import httpx
import pytest
from lazy_import import lazy_module
from serve_helpers import Served, serve

from engine.backends.base import Capabilities, PlainBackend, Request, Sampling, StreamInfo
from engine.cancel import CancelToken
from engine.events import Piece, TokenLogprob
from engine.llama.llama import LlamaBackend

if TYPE_CHECKING:
    import openai
else:  # imported when a test first uses it: collection stays light (#53)
    openai = lazy_module("openai")


class RawBackend(PlainBackend):
    """Continues any prompt with " upon a time." in three pieces; records the requests."""

    capabilities = Capabilities(device="Scripted")

    def __init__(self) -> None:
        self.name = "raw.gguf"
        self.requests: list[Request] = []

    def stream(self, request: Request, cancel: CancelToken, info: StreamInfo) -> Iterator[Piece]:
        self.requests.append(request)
        for i, text in enumerate((" upon", " a", " time.")):
            if i >= request.max_tokens:
                info.finish_reason = "length"
                return
            entry = TokenLogprob(text, tuple(text.encode()), -0.5 - i, (TokenLogprob(text, (), -0.5 - i),))
            yield Piece(text, logprobs=(entry,) if request.logprobs is not None else ())
        info.finish_reason = "stop"

    def close(self) -> None:
        pass


def _client(served: list[Served]) -> tuple[openai.OpenAI, RawBackend]:
    backend = RawBackend()
    served.append(serve(backend))
    return openai.OpenAI(base_url=served[-1].url, api_key="x", max_retries=0, timeout=30), backend


def test_a_raw_prompt_is_continued_without_a_template(served: list[Served]) -> None:
    client, backend = _client(served)
    reply = client.completions.create(model="raw", prompt="Once", max_tokens=8)
    assert reply.object == "text_completion" and reply.choices[0].text == " upon a time."
    assert reply.choices[0].finish_reason == "stop"
    sent = backend.requests[0]
    assert sent.prompt == "Once" and sent.messages == () and sent.suffix is None


def test_echo_stop_and_max_tokens(served: list[Served]) -> None:
    client, _ = _client(served)
    assert client.completions.create(model="r", prompt="Once", echo=True).choices[0].text == "Once upon a time."
    stopped = client.completions.create(model="r", prompt="Once", stop=[" a"])
    assert stopped.choices[0].text == " upon" and stopped.choices[0].finish_reason == "stop"
    cut = client.completions.create(model="r", prompt="Once", max_tokens=1)
    assert cut.choices[0].text == " upon" and cut.choices[0].finish_reason == "length"


def test_streamed_with_legacy_logprobs(served: list[Served]) -> None:
    client, backend = _client(served)
    chunks = list(client.completions.create(model="r", prompt="Once", stream=True, logprobs=1, echo=True))
    assert "".join(c.choices[0].text for c in chunks if c.choices) == "Once upon a time."
    tokens = [t for c in chunks if c.choices and c.choices[0].logprobs for t in c.choices[0].logprobs.tokens or []]
    assert tokens == [" upon", " a", " time."] and backend.requests[0].logprobs == 1
    whole = client.completions.create(model="r", prompt="Once", logprobs=1, echo=True).choices[0].logprobs
    assert whole is not None and whole.token_logprobs == [-0.5, -1.5, -2.5]
    assert whole.text_offset == [4, 9, 11]  # after the echoed prompt
    assert whole.top_logprobs == [{" upon": -0.5}, {" a": -1.5}, {" time.": -2.5}]


def test_a_prompt_must_be_one_string(served: list[Served]) -> None:
    _client(served)
    reply = httpx.post(f"{served[-1].url}/completions", json={"prompt": ["a", "b"]}, timeout=30)
    assert reply.status_code == 400 and reply.json()["error"]["param"] == "prompt"


def test_one_model_by_id(served: list[Served]) -> None:
    client, _ = _client(served)
    assert client.models.retrieve("raw").id == "raw"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-4")


def test_suffix_without_fim_tokens_is_refused_in_one_line(served: list[Served], tmp_path: Path) -> None:
    backend = LlamaBackend(gf.write_tiny_llama(tmp_path / "tiny.gguf"), n_ctx=256)
    assert backend.fim_tokens is None
    served.append(serve(backend, max_tokens=4, context_size=256))
    reply = httpx.post(
        f"{served[-1].url}/completions",
        timeout=60,
        json={"prompt": "def f(", "suffix": "    return x\n", "max_tokens": 4},
    )
    assert reply.status_code == 400
    message = reply.json()["error"]["message"]
    assert "no fill-in-the-middle tokens" in message and "\n" not in message


def test_fill_in_the_middle_where_the_vocabulary_has_fim_tokens(served: list[Served], tmp_path: Path) -> None:
    tokens = (*gf.CHATML_TOKENS, "<fim_prefix>", "<fim_suffix>", "<fim_middle>")
    backend = LlamaBackend(gf.write_tiny_llama(tmp_path / "fim.gguf", tokens=tokens), n_ctx=256)
    fim = backend.fim_tokens
    assert fim is not None
    request = Request((), prompt="def f(", suffix="    return x\n")
    ids, _ = backend.prompt_tokens(request)
    assert ids[ids.index(fim[0]) :] == [
        fim[0],
        *_plain(backend, "def f("),
        fim[1],
        *_plain(backend, "    return x\n"),
        fim[2],
    ]
    served.append(serve(backend, max_tokens=4, context_size=256))
    reply = httpx.post(
        f"{served[-1].url}/completions",
        timeout=60,
        json={"prompt": "def f(", "suffix": "    return x\n", "max_tokens": 3, "temperature": 0},
    )
    assert reply.status_code == 200 and reply.json()["usage"]["prompt_tokens"] == len(ids)


def _plain(backend: LlamaBackend, text: str) -> list[int]:
    return list(backend.raw().tokenize(text.encode(), add_bos=False, special=True))


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_built_in_model_takes_raw_prompts_but_has_no_fim_tokens(smollm: LlamaBackend) -> None:
    assert smollm.fim_tokens is None  # SmolLM2's <fim_prefix> is not one token of its vocabulary
    raw, _ = smollm.prompt_tokens(Request((), prompt="Hello"))
    assert raw == _plain(smollm, "Hello")  # no template around it
    pieces = [
        p
        for p in smollm.stream(
            Request((), sampling=Sampling.greedy(), max_tokens=4, prompt="The sky is"), CancelToken(), StreamInfo()
        )
        if isinstance(p, Piece)
    ]
    assert "".join(p.text for p in pieces).strip()
