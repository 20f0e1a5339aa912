"""Ollama's `images` (base64 on a message, or on `/api/generate`) reach a vision model as the same
checked images as OpenAI's `image_url` parts; a model that cannot see refuses them in one line."""

from __future__ import annotations

import base64
import struct
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from lazy_import import lazy_module
from serve_helpers import EchoBackend, SeeingEcho, Served, serve

from desktop.serve.wire_images import MAX_IMAGES
from tests.projector_fixture import png, png_chunks

if TYPE_CHECKING:
    import ollama
else:  # imported when a test first uses it: collection stays light (#53)
    ollama = lazy_module("ollama")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _chat(s: Served, message: dict[str, Any]) -> httpx.Response:
    body = {"model": "default", "stream": False, "messages": [message]}
    return httpx.post(f"{s.url.removesuffix('/v1')}/api/chat", json=body, timeout=30)


def test_the_ollama_client_sends_a_picture_to_a_vision_model(seeing: tuple[Served, SeeingEcho]) -> None:
    s, backend = seeing
    picture, other = png(6, 4), png(3, 3)
    client = ollama.Client(host=s.url.removesuffix("/v1"), timeout=30)
    reply = client.chat(model="default", messages=[{"role": "user", "content": "what is this", "images": [picture]}])
    assert reply.message.content == "echo: what is this"
    assert [i.data for i in backend.seen[-1]] == [picture]
    assert client.generate(model="default", prompt="and this", images=[other, picture]).response == "echo: and this"
    assert [i.data for i in backend.seen[-1]] == [other, picture]
    assert "vision" in (client.show("default").capabilities or [])


def test_a_data_url_is_taken_too(seeing: tuple[Served, SeeingEcho]) -> None:
    s, backend = seeing
    picture = png(5, 5)
    response = _chat(s, {"role": "user", "content": "hi", "images": ["data:image/png;base64," + _b64(picture)]})
    assert response.status_code == 200, response.text
    assert [i.data for i in backend.seen[-1]] == [picture]


@pytest.mark.parametrize(
    ("images", "says", "param"),
    [
        (["http://127.0.0.1:9/cat.png"], "not valid base64", "messages[0].images[0]"),
        (["data:text/plain;base64,aGk="], "never fetched", "messages[0].images[0]"),
        (
            [_b64(png_chunks(struct.pack(">IIBBBBB", 30_000, 30_000, 8, 2, 0, 0, 0), b""))],
            "megapixels",
            "messages[0].images[0]",
        ),
        ([_b64(b"%PDF-1.4 a document")], "not a PNG", "messages[0].images[0]"),
        ([_b64(png(2, 2))] * (MAX_IMAGES + 1), f"at most {MAX_IMAGES}", "messages[0].images"),
        ("not a list", "must be an array", "messages[0].images"),
    ],
)
def test_hostile_images_are_refused_in_one_line_before_the_model(
    seeing: tuple[Served, SeeingEcho], images: Any, says: str, param: str | None
) -> None:
    s, backend = seeing
    response = _chat(s, {"role": "user", "content": "hi", "images": images})
    assert response.status_code == 400
    error = response.json()["error"]
    assert isinstance(error, str) and says in error and "\n" not in error
    assert param is None or error.startswith(f"'{param}")
    assert backend.seen == []


def test_images_only_on_a_user_message(seeing: tuple[Served, SeeingEcho]) -> None:
    s, backend = seeing
    body = {
        "model": "m",
        "stream": False,
        "messages": [
            {"role": "assistant", "content": "look", "images": [_b64(png(2, 2))]},
            {"role": "user", "content": "hi"},
        ],
    }
    response = httpx.post(f"{s.url.removesuffix('/v1')}/api/chat", json=body, timeout=30)
    assert response.status_code == 400 and "only a user message" in response.json()["error"]
    assert backend.seen == []


def test_a_raw_prompt_takes_no_images(seeing: tuple[Served, SeeingEcho]) -> None:
    s, backend = seeing
    body = {"model": "m", "prompt": "x", "raw": True, "stream": False, "images": [_b64(png(2, 2))]}
    response = httpx.post(f"{s.url.removesuffix('/v1')}/api/generate", json=body, timeout=30)
    assert response.status_code == 400 and "chat template" in response.json()["error"]
    assert backend.seen == []


def test_a_model_that_cannot_see_refuses_the_picture_in_one_line(served: list[Served]) -> None:
    backend = EchoBackend()
    served.append(serve(backend))
    response = _chat(served[-1], {"role": "user", "content": "hi", "images": [_b64(png(4, 4))]})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert "no vision projector" in error and "\n" not in error
    assert backend.pieces == 0


def test_a_5_mb_photo_gets_through_and_the_text_keeps_its_bound(seeing: tuple[Served, SeeingEcho]) -> None:
    from test_serve_images import _photo

    from desktop.serve.app import MAX_BODY_BYTES

    s, backend = seeing
    picture = _photo(5_000_000)
    response = _chat(s, {"role": "user", "content": "what is this", "images": [_b64(picture)]})
    assert response.status_code == 200, response.text  # 6.7 MB of base64: over the 4 MB text bound
    assert [i.data for i in backend.seen[-1]] == [picture]
    seen = len(backend.seen)
    response = _chat(s, {"role": "user", "content": "x" * (MAX_BODY_BYTES + 1)})
    assert response.status_code == 413 and "images aside" in response.json()["error"]
    assert len(backend.seen) == seen
