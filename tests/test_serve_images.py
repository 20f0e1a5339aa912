"""`ember serve` takes OpenAI image_url parts as data URLs only: never fetched, checked first."""

from __future__ import annotations

import base64
import struct
import zlib
from typing import Any, cast

import httpx
import pytest
from serve_helpers import EchoBackend, SeeingEcho, Served, serve

from desktop.serve.wire_images import MAX_IMAGE_BYTES, MAX_IMAGES
from tests.projector_fixture import png, png_chunks


def _post(s: Served, content: list[dict[str, Any]]) -> httpx.Response:
    body = {"model": "m", "messages": [{"role": "user", "content": content}]}
    return httpx.post(f"{s.url}/chat/completions", json=body, timeout=30)


def _url(data: bytes) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(data).decode()}}


def test_a_data_url_image_reaches_the_model(seeing: tuple[Served, SeeingEcho]) -> None:
    s, backend = seeing
    picture = png(6, 4)
    response = _post(s, [{"type": "text", "text": "what is this"}, _url(picture)])
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "echo: what is this"
    assert [i.data for i in backend.seen[-1]] == [picture]


@pytest.mark.parametrize(
    ("part", "says"),
    [
        ({"type": "image_url", "image_url": {"url": "http://127.0.0.1:9/cat.png"}}, "never fetched"),
        ({"type": "image_url", "image_url": {"url": "file:///etc/passwd"}}, "never fetched"),
        (_url(png_chunks(struct.pack(">IIBBBBB", 30_000, 30_000, 8, 2, 0, 0, 0), b"")), "megapixels"),
        (_url(b"%PDF-1.4 a document"), "not a PNG"),
    ],
)
def test_links_and_hostile_images_get_a_400_in_one_line(
    seeing: tuple[Served, SeeingEcho], part: dict[str, Any], says: str
) -> None:
    s, backend = seeing
    response = _post(s, [{"type": "text", "text": "hi"}, part])
    assert response.status_code == 400
    error = response.json()["error"]
    assert says in error["message"] and "\n" not in error["message"]
    assert error["param"] == "messages[0].content[1]"
    assert backend.seen == []


def test_a_model_that_cannot_see_refuses_the_image() -> None:
    s = serve(EchoBackend())
    try:
        response = _post(s, [{"type": "text", "text": "hi"}, _url(png(4, 4))])
        assert response.status_code == 400, response.text
        assert "no vision projector" in response.json()["error"]["message"]
    finally:
        s.close()


def _photo(size: int) -> bytes:
    """A PNG of about `size` bytes (stored, not compressed: a photo's bytes do not shrink either)."""
    width = 1024
    height = size // (width * 3 + 1) + 1
    rows = b"".join(b"\0" + bytes((x + y) % 256 for x in range(width * 3)) for y in range(height))
    return png_chunks(struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0), zlib.compress(rows, 0))


def test_a_5_mb_photo_gets_through(seeing: tuple[Served, SeeingEcho]) -> None:
    s, backend = seeing
    picture = _photo(5_000_000)
    assert len(base64.b64encode(picture)) > 6_500_000  # more than the 4 MB text bound, as sent
    response = _post(s, [{"type": "text", "text": "what is this"}, _url(picture)])
    assert response.status_code == 200, response.text
    assert [i.data for i in backend.seen[-1]] == [picture]


def test_an_image_over_the_api_cap_gets_a_400_in_one_line(seeing: tuple[Served, SeeingEcho]) -> None:
    s, backend = seeing
    response = _post(s, [{"type": "text", "text": "hi"}, _url(_photo(MAX_IMAGE_BYTES + 1))])
    assert response.status_code == 400
    message = response.json()["error"]["message"]
    assert "over 8 MB" in message and "\n" not in message
    assert backend.seen == []


def test_the_images_a_message_may_carry_fit_the_body_bound() -> None:
    from desktop.serve.app import MAX_BODY_BYTES, MAX_CHAT_BODY_BYTES

    most = MAX_IMAGES * len(_url(b"x" * MAX_IMAGE_BYTES)["image_url"]["url"])
    assert MAX_BODY_BYTES + most <= MAX_CHAT_BODY_BYTES < 100 * 2**20  # room for all, and still firm


def _two_part_request(name: str, parts: list[bytes], gate: Any, received: list[str], length: bool = True) -> Any:
    """A starlette Request whose body comes as `parts`; each part after the first waits for `gate`
    (an asyncio.Event), and `received` names each part as the server takes it ("a1", "a2", …)."""
    from starlette.requests import Request

    left = list(parts)

    async def receive() -> dict[str, object]:
        if len(left) < len(parts):
            await gate.wait()
        received.append(f"{name}{len(parts) - len(left) + 1}")
        body = left.pop(0)
        return {"type": "http.request", "body": body, "more_body": bool(left)}

    size = sum(len(p) for p in parts)
    headers = [(b"content-length", str(size).encode())] if length else [(b"transfer-encoding", b"chunked")]
    return Request({"type": "http", "method": "POST", "headers": headers}, receive)


def test_only_two_picture_sized_bodies_are_read_past_the_text_bound_at_once() -> None:
    """256 connections must not make the server hold 256 bodies of 89 MB: past the text bound,
    bodies are read on `LARGE_READS` at a time; the rest wait there (the socket holds their bytes)."""
    import asyncio

    from desktop.serve.app import LARGE_READS, MAX_BODY_BYTES, ServeState, read_chat_body

    received: list[str] = []

    async def scenario() -> None:
        state = ServeState(cast(Any, None), lambda: "m", cast(Any, lambda: None))
        gates = {name: asyncio.Event() for name in "abc"}
        parts = [b"x" * MAX_BODY_BYTES, b"y"]  # one byte past the text bound
        reads = {
            n: asyncio.ensure_future(read_chat_body(_two_part_request(n, parts, gates[n], received), state))
            for n in "abc"
        }
        await asyncio.sleep(0.05)
        assert LARGE_READS == 2 and sorted(received) == ["a1", "b1", "c1"]  # each has read its text bound
        gates["a"].set()
        assert len(await reads["a"]) == MAX_BODY_BYTES + 1
        gates["c"].set()
        await asyncio.sleep(0.05)
        assert "c2" in received and "b2" not in received  # a's slot went to c; b still holds its own
        gates["b"].set()
        assert [len(await reads[n]) for n in "bc"] == [MAX_BODY_BYTES + 1] * 2

    asyncio.run(scenario())


@pytest.mark.parametrize("length", [True, False], ids=["declared-5MB", "chunked"])
def test_slow_bodies_that_stay_small_hold_no_large_slot(length: bool) -> None:
    """S5-145/146: two connections trickling bodies (chunked, or declaring more than 4 MB) used to hold both
    large-body slots, so every chunked request waited up to 30 s. A body takes a slot only once it
    has really passed the text bound."""
    import asyncio

    from desktop.serve.app import ServeState, read_chat_body

    received: list[str] = []

    async def scenario() -> None:
        state = ServeState(cast(Any, None), lambda: "m", cast(Any, lambda: None))
        never = asyncio.Event()
        slow = [b"{" * 10, b"x" * 5_000_000] if length else [b"{", b"x"]
        trickling = [
            asyncio.ensure_future(read_chat_body(_two_part_request(n, slow, never, received, length), state))
            for n in "ab"
        ]
        small = _two_part_request("c", [b'{"messages": []}'], never, received, length=False)
        assert await asyncio.wait_for(read_chat_body(small, state), 2) == b'{"messages": []}'
        for task in trickling:
            task.cancel()

    asyncio.run(scenario())
