"""`POST /v1/embeddings` on `ember serve --embedder`: OpenAI's shape (float and base64), hostile input
refused with a 4xx, the model's line shared with chat (never two at once), disconnects that stop it,
and the real built-in model through the official `openai` client."""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from lazy_import import lazy_module
from serve_helpers import EchoBackend, Served, serve

from desktop.cli.main import main
from desktop.serve.embeddings import batches
from engine.backends.base import Request, StreamInfo
from engine.cancel import CancelToken
from engine.events import Piece

if TYPE_CHECKING:
    import openai
else:  # imported when a test first uses it: collection stays light (#53)
    openai = lazy_module("openai")


class Activity:
    """Counts what holds a model at once, across the chat backend and the embedder."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active = 0
        self.most = 0

    def enter(self) -> None:
        with self.lock:
            self.active += 1
            self.most = max(self.most, self.active)

    def leave(self) -> None:
        with self.lock:
            self.active -= 1


class FakeEmbedder:
    """Deterministic vectors from each text's hash; a token per word plus one (as BOS)."""

    def __init__(self, activity: Activity | None = None, delay_s: float = 0.0, max_tokens: int = 16) -> None:
        self.name = "/models/fake-embed.gguf"
        self.dimensions = 4
        self.max_tokens = max_tokens
        self.activity = activity or Activity()
        self.delay_s = delay_s
        self.batches: list[list[str]] = []

    def count_tokens(self, text: str) -> int:
        return len(text.split()) + 1

    def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        self.activity.enter()
        try:
            time.sleep(self.delay_s)
            self.batches.append(list(texts))
            return [vector(t) for t in texts]
        finally:
            self.activity.leave()

    def close(self) -> None:
        pass


def vector(text: str) -> list[float]:
    raw = [b - 128.0 for b in hashlib.sha256(text.encode()).digest()[:4]]
    norm = math.sqrt(sum(x * x for x in raw)) or 1.0
    return [x / norm for x in raw]


class WatchedEcho(EchoBackend):
    def __init__(self, activity: Activity, delay_s: float) -> None:
        super().__init__(delay_s=delay_s)
        self.activity = activity

    def stream(self, request: Request, cancel: CancelToken, info: StreamInfo) -> Iterator[Piece]:
        self.activity.enter()
        try:
            yield from super().stream(request, cancel, info)
        finally:
            self.activity.leave()


@pytest.fixture
def started() -> Iterator[list[Served]]:
    servers: list[Served] = []
    yield servers
    for s in servers:
        s.close()


def _serve(started: list[Served], embedder: Any, backend: EchoBackend | None = None, **kwargs: Any) -> Served:
    s = serve(backend or EchoBackend(), embedder=embedder, **kwargs)
    started.append(s)
    return s


def _client(s: Served) -> openai.OpenAI:
    return openai.OpenAI(base_url=s.url, api_key="unused", max_retries=0, timeout=20)


def _post(s: Served, body: Any, timeout: float = 30) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(
        f"{s.url}/embeddings", content=content, headers={"content-type": "application/json"}, timeout=timeout
    )


def test_the_openai_client_gets_vectors_in_order_with_usage(started: list[Served]) -> None:
    s = _serve(started, FakeEmbedder())
    client = _client(s)
    texts = ["the cat sat", "a dog ran far", "birds"]
    reply = client.embeddings.create(model="anything", input=texts)  # the client asks for base64 by default
    assert [d.index for d in reply.data] == [0, 1, 2]
    for d, text in zip(reply.data, texts, strict=True):
        assert d.embedding == pytest.approx(vector(text), abs=1e-6)
    assert reply.model == "fake-embed"
    assert reply.usage.prompt_tokens == reply.usage.total_tokens == 4 + 5 + 2
    single = client.embeddings.create(model="x", input="birds", encoding_format="float")
    assert len(single.data) == 1 and single.data[0].embedding == pytest.approx(vector("birds"), abs=1e-6)


def test_base64_is_little_endian_float32_as_openai_sends_it(started: list[Served]) -> None:
    import base64
    import struct

    s = _serve(started, FakeEmbedder())
    body = _post(s, {"model": "x", "input": "birds", "encoding_format": "base64"}).json()
    raw = base64.b64decode(body["data"][0]["embedding"])
    assert struct.unpack("<4f", raw) == pytest.approx(vector("birds"), abs=1e-6)


def test_models_lists_the_embedding_model_beside_the_chat_model(started: list[Served]) -> None:
    s = _serve(started, FakeEmbedder())
    assert [m.id for m in _client(s).models.list()] == ["echo", "fake-embed"]


def test_inputs_are_embedded_in_batches_that_fit_the_model() -> None:
    assert batches([5, 5, 5, 16, 1], 16) == [range(3), range(3, 4), range(4, 5)]
    assert batches([], 16) == []


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "m", "input": []}, "input"),
        ({"model": "m", "input": ["x"] * 10_000}, "input"),
        ({"model": "m", "input": ""}, "input"),
        ({"model": "m", "input": ["ok", ""]}, "input[1]"),
        ({"model": "m", "input": {"text": "hi"}}, "input"),
        ({"model": "m", "input": ["ok", None]}, "input[1]"),
        ({"model": "m", "input": ["ok", 3.5]}, "input[1]"),
        ({"model": "m", "input": [1, 2, 3]}, "input[0]"),  # a token array
        ({"model": "m", "input": [[1, 2], [3]]}, "input[0]"),
        ({"model": "m"}, "input"),
        ({"model": 5, "input": "hi"}, "model"),
        ({"model": "m", "input": "hi", "encoding_format": "int8"}, "encoding_format"),
        ({"model": "m", "input": "hi", "dimensions": 256}, "dimensions"),
        ({"model": "m", "input": "hi", "dimensions": "4"}, "dimensions"),
        ({"model": "m", "input": ["ok", "word " * 40]}, "input[1]"),  # longer than the model reads at once
        (b"{not json", None),
        (b"[]", None),
    ],
)
def test_bad_embedding_requests_get_a_400_and_the_server_keeps_serving(
    started: list[Served], body: Any, param: str | None
) -> None:
    embedder = FakeEmbedder()
    s = _serve(started, embedder)
    response = _post(s, body)
    assert response.status_code == 400, response.text[:300]
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    assert error["type"] == "invalid_request_error" and error["param"] == param
    assert embedder.batches == []  # refused before any work
    assert _post(s, {"model": "m", "input": "still here"}).status_code == 200


def test_a_text_too_long_says_how_long(started: list[Served]) -> None:
    s = _serve(started, FakeEmbedder(max_tokens=16))
    error = _post(s, {"input": "word " * 40}).json()["error"]
    assert error["code"] == "context_length_exceeded" and "41 tokens" in error["message"] and "16" in error["message"]


def test_without_an_embedder_the_endpoint_is_501_and_says_how_to_get_one(started: list[Served]) -> None:
    s = _serve(started, None)
    with pytest.raises(openai.APIStatusError) as info:
        _client(s).embeddings.create(model="m", input="hello")
    assert info.value.status_code == 501 and info.value.code == "embeddings_unavailable"
    assert "--embedder" in info.value.message


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
def test_embeddings_and_chat_share_the_line_and_never_run_at_once(started: list[Served]) -> None:
    activity = Activity()
    embedder = FakeEmbedder(activity, delay_s=0.01)
    s = _serve(started, embedder, WatchedEcho(activity, delay_s=0.005), max_waiting=32)
    results: list[int] = []
    lock = threading.Lock()

    def embed(i: int) -> None:
        status = _post(s, {"input": [f"text {i} {j}" for j in range(12)]}).status_code
        with lock:
            results.append(status)

    def chat(i: int) -> None:
        status = httpx.post(
            f"{s.url}/chat/completions",
            timeout=30,
            json={"model": "m", "messages": [{"role": "user", "content": f"hello {i} there"}]},
        ).status_code
        with lock:
            results.append(status)

    work: list[Callable[[int], None]] = [embed, chat]
    threads = [threading.Thread(target=work[i % 2], args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results == [200] * 16
    assert activity.most == 1  # one model at work at a time, embedder included
    assert len(embedder.batches) >= 8 * 3  # 12 texts of 4 tokens: three batches of 16 tokens each
    assert not s.state.line.busy


def test_a_client_that_leaves_stops_the_embedding_at_the_next_batch(started: list[Served]) -> None:
    embedder = FakeEmbedder(delay_s=0.05)
    s = _serve(started, embedder)
    texts = [f"text number {i}" for i in range(400)]  # 4 tokens each: 100 batches, 5 s if nobody stopped it
    with pytest.raises(httpx.ReadTimeout):
        _post(s, {"input": texts}, timeout=0.5)
    deadline = time.monotonic() + 5
    while s.state.line.busy and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not s.state.line.busy
    assert len(embedder.batches) < 40
    assert _post(s, {"input": "still here"}).status_code == 200


def test_an_embedder_that_is_missing_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"replies": [["hi"]]}))
    code = main(["serve", "--port", "0", "--backend", f"script:{script}", "--embedder", str(tmp_path / "no.gguf")])
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "embedding model not found" in err


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_built_in_model_as_embedder_through_the_openai_client(started: list[Served], smollm_path: Path) -> None:
    from desktop.serve.embeddings import LlamaTextEmbedder

    embedder = LlamaTextEmbedder.load(smollm_path)
    try:
        s = _serve(started, embedder)
        client = _client(s)
        texts = ["The cat sat on the mat.", "A kitten rested on the rug.", "Quarterly tax filing deadlines"]
        reply = client.embeddings.create(model="default", input=texts)
        rows = [d.embedding for d in reply.data]
        assert all(len(r) == embedder.dimensions == 576 for r in rows)
        assert all(abs(math.sqrt(sum(x * x for x in r)) - 1) < 1e-3 for r in rows)
        # The same vectors the app's own document search gets, in float or base64 alike.
        direct = embedder.embed(texts)
        for got, want in zip(rows, direct, strict=True):
            assert got == pytest.approx(want, abs=1e-5)
        floats = client.embeddings.create(model="default", input=texts[0], encoding_format="float")
        assert floats.data[0].embedding == pytest.approx(direct[0], abs=1e-5)
        assert reply.usage.prompt_tokens == sum(embedder.count_tokens(t) for t in texts)

        def cos(a: Sequence[float], b: Sequence[float]) -> float:
            return sum(x * y for x, y in zip(a, b, strict=True))

        assert cos(rows[0], rows[1]) > cos(rows[0], rows[2])
    finally:
        embedder.close()
