"""`ember serve` under hostile input and load: 4xx in OpenAI's shape, 429 when the line is full,
disconnects that cancel, and 32 concurrent streaming clients with none lost or mixed up."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from serve_helpers import EchoBackend, Served, serve

from engine.backends.scripted import ScriptedBackend


@pytest.fixture
def echo() -> Iterator[tuple[Served, EchoBackend]]:
    backend = EchoBackend()
    s = serve(backend, max_waiting=4)
    yield s, backend
    s.close()


def _post(s: Served, body: Any, timeout: float = 30) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(
        f"{s.url}/chat/completions", content=content, headers={"content-type": "application/json"}, timeout=timeout
    )


def _chat(text: str = "hello", **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": text}], **extra}


def _error(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text[:300]
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    return error


def _still_serving(s: Served) -> None:
    reply = _post(s, _chat("still here", max_tokens=3))
    assert reply.status_code == 200 and reply.json()["choices"][0]["message"]["content"] == "echo: still here"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (b"{not json", None),
        (b"[1, 2]", None),
        (b"[" * 100_000, None),  # nesting deeper than any parser should follow
        (_chat(temperature="hot"), "temperature"),
        (_chat(temperature=7), "temperature"),
        (_chat(max_tokens=10**12), "max_tokens"),
        (_chat(max_tokens=0), "max_tokens"),
        (_chat(max_tokens=True), "max_tokens"),
        (_chat(stream="yes"), "stream"),
        (_chat(stop=["a", "b", "c", "d", "e"]), "stop"),
        (_chat(seed=1.5), "seed"),
        (_chat(n=9), "n"),
        (_chat(tools="get_weather"), "tools"),
        (_chat(tool_choice={"type": "function", "function": {"name": "nope"}}), "tool_choice"),
        (_chat(response_format={"type": "xml"}), "response_format.type"),
        (
            _chat(response_format={"type": "json_schema", "json_schema": {"schema": {"type": 12}}}),
            "response_format.json_schema.schema",
        ),
        ({"model": "m", "messages": []}, "messages"),
        ({"model": "m", "messages": [{"role": "wizard", "content": "hi"}]}, "messages[0].role"),
        ({"model": "m", "messages": [{"role": "user", "content": 42}]}, "messages[0].content"),
        (
            {"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
            "messages[0].content[0]",
        ),
        ({"model": "m", "messages": [{"role": "user", "content": "hi"}] * 10_000}, "messages"),
        ({"model": 5, "messages": [{"role": "user", "content": "hi"}]}, "model"),
    ],
)
def test_bad_requests_get_a_400_and_the_server_keeps_serving(
    echo: tuple[Served, EchoBackend], body: Any, param: str | None
) -> None:
    s, _ = echo
    error = _error(_post(s, body), 400)
    assert error["type"] == "invalid_request_error" and error["param"] == param
    _still_serving(s)


def test_a_10_mb_message_is_refused_and_a_huge_body_before_it_is_read_whole(echo: tuple[Served, EchoBackend]) -> None:
    s, _ = echo
    error = _error(_post(s, _chat("x" * 10_000_000)), 413)  # under the body bound (images), over the text's
    assert error["code"] == "request_too_large"
    assert "text, images aside, is larger than 4 MB" in error["message"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit holds while reading
        yield b'{"model": "m", "messages": [{"role": "user", "content": "'
        for _ in range(100):
            yield b"y" * 1_000_000
        yield b'"}]}'

    error = _error(httpx.post(f"{s.url}/chat/completions", content=chunks(), timeout=30), 413)
    assert "request body is larger than 89 MB" in error["message"] and "\n" not in error["message"]
    _still_serving(s)


def test_unknown_routes_and_methods_answer_in_openai_shape(echo: tuple[Served, EchoBackend]) -> None:
    s, _ = echo
    _error(httpx.get(f"{s.url}/chat/completions"), 405)
    _error(httpx.get(f"{s.url}/nothing-here"), 404)
    _error(httpx.get(f"{s.url}/completions"), 405)
    _error(httpx.post(f"{s.url}/completions", json={}), 400)  # served now: a prompt is required


def test_a_full_line_gets_429_with_retry_after() -> None:
    gate = threading.Event()
    backend = EchoBackend(gate=gate)
    s = serve(backend, max_waiting=1)
    try:
        results: list[httpx.Response] = []
        threads = [threading.Thread(target=lambda: results.append(_post(s, _chat("slow one")))) for _ in range(2)]
        threads[0].start()
        _wait_for(lambda: s.state.line.busy)
        threads[1].start()
        _wait_for(lambda: s.state.line.waiting == 1)
        refused = _post(s, _chat("one too many"))
        error = _error(refused, 429)
        assert error["code"] == "queue_full" and int(refused.headers["retry-after"]) >= 1
        gate.set()
        for t in threads:
            t.join(30)
        assert [r.status_code for r in results] == [200, 200]
    finally:
        s.close()


def _wait_for(condition: Any, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_disconnect_mid_stream_cancels_the_generation() -> None:
    backend = EchoBackend(delay_s=0.02, repeat=200)  # 400 pieces: 8 s if nobody stopped it
    s = serve(backend)
    try:
        with httpx.stream(
            "POST", f"{s.url}/chat/completions", json=_chat("long story", stream=True), timeout=30
        ) as response:
            lines = response.iter_lines()
            seen = [line for _, line in zip(range(6), lines, strict=False)]
        assert any(line.startswith("data: ") for line in seen)
        started = time.monotonic()
        _wait_for(lambda: backend.cancelled == 1 and not s.state.line.busy)
        assert time.monotonic() - started < 2
        assert backend.pieces < 100
        assert not s.engine.busy
        _still_serving(s)
    finally:
        s.close()


def test_a_client_that_leaves_while_queued_gives_up_its_place() -> None:
    gate = threading.Event()
    backend = EchoBackend(repeat=20, gate=gate)
    s = serve(backend, max_waiting=1)
    try:
        first = threading.Thread(target=lambda: _post(s, _chat("first")))
        first.start()
        _wait_for(lambda: s.state.line.busy)
        with pytest.raises(httpx.ReadTimeout):
            _post(s, _chat("impatient"), timeout=0.3)
        _wait_for(lambda: s.state.line.waiting == 0)
        gate.set()
        first.join(30)
        assert backend.pieces == 2 * 20 + 0  # the impatient request never reached the model
    finally:
        s.close()


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
def test_32_streaming_clients_300_requests_none_lost_or_mixed_up() -> None:
    backend = EchoBackend(repeat=3)
    s = serve(backend, max_waiting=16)
    try:
        asyncio.run(_load(s.url, clients=32, requests=64))  # warm-up: the memory baseline
        before = _rss_mb()
        outcome = asyncio.run(_load(s.url, clients=32, requests=300))
        assert outcome["ok"] + outcome["refused"] == 300, outcome
        assert outcome["ok"] >= 32 and outcome["wrong"] == 0, outcome
        _wait_for(lambda: not s.state.line.busy and not s.state.jobs and not s.engine.busy)
        assert s.state.line.waiting == 0 and s.state.requests == 364
        assert _rss_mb() - before < 25, (before, _rss_mb())  # flat: nothing kept per request
    finally:
        s.close()


def _rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


async def _load(url: str, *, clients: int, requests: int) -> dict[str, int]:
    counts = {"ok": 0, "refused": 0, "wrong": 0}
    numbers = iter(range(requests))

    async def client(http: httpx.AsyncClient) -> None:
        for n in numbers:
            prompt = f"request {n}"
            async with http.stream("POST", f"{url}/chat/completions", json=_chat(prompt, stream=True)) as response:
                if response.status_code == 429:
                    counts["refused"] += 1
                    await response.aread()
                    continue
                text = ""
                async for line in response.aiter_lines():
                    if line.startswith("data: ") and line != "data: [DONE]":
                        chunk = json.loads(line[6:])
                        text += chunk["choices"][0]["delta"].get("content") or "" if chunk["choices"] else ""
            expected = " ".join([f"echo: {prompt}"] * 3)
            counts["ok" if text == expected else "wrong"] += 1

    limits = httpx.Limits(max_connections=clients)
    async with httpx.AsyncClient(timeout=60, limits=limits) as http:
        await asyncio.gather(*(client(http) for _ in range(clients)))
    return counts


def test_scripted_backend_errors_mid_stream_end_with_an_error_chunk() -> None:
    s = serve(ScriptedBackend.from_texts())  # no replies: the script is exhausted at once
    try:
        error = _error(_post(s, _chat("hi")), 500)
        assert error["type"] == "server_error" and error["code"] == "script"
    finally:
        s.close()


def test_the_windows_stop_leaves_api_replies_alone() -> None:
    gate = threading.Event()
    s = serve(EchoBackend(gate=gate))
    try:
        results: list[httpx.Response] = []
        client = threading.Thread(target=lambda: results.append(_post(s, _chat("mine"))))
        client.start()
        _wait_for(lambda: s.state.line.busy and s.engine.busy)
        s.engine.stop()  # what the window's Stop button (Esc) calls
        gate.set()
        client.join(30)
        assert results[0].json()["choices"][0]["message"]["content"] == "echo: mine"
    finally:
        s.close()
