"""Images before any decoder: kind and size from the header, bounds, data URLs, the wire shape."""

from __future__ import annotations

import base64
import struct
import zlib

import pytest
from sse_stub import DONE, Reply, StubServer, chunk

from engine.backends.base import CancelToken, StreamInfo, make_request
from engine.backends.image_input import MAX_PIXELS, ImageData, check_image, data_url, from_data_url
from engine.backends.openai import OpenAIBackend
from engine.errors import ConfigError
from tests.projector_fixture import png, png_chunks


def one_line_refusal(data: bytes) -> str:
    with pytest.raises(ConfigError) as caught:
        check_image(data, "shot.png")
    message = str(caught.value)
    assert "\n" not in message and message.startswith("shot.png")
    return message


def test_png_gif_bmp_and_jpeg_sizes_come_from_their_headers() -> None:
    assert check_image(png(40, 30)) == check_image(png(40, 30, bit_depth=16))
    assert (check_image(png(40, 30)).width, check_image(png(40, 30)).height) == (40, 30)
    gif = b"GIF89a" + struct.pack("<HH", 7, 5) + b"\x00" * 20
    assert check_image(gif).mime == "image/gif" and check_image(gif).width == 7
    bmp = b"BM" + b"\x00" * 16 + struct.pack("<ii", 9, -4) + b"\x00" * 30
    assert (check_image(bmp).width, check_image(bmp).height) == (9, 4)
    # JPEG: SOI, an APP0 segment, then the frame header (SOF2, progressive) with height 6, width 11
    jpeg = b"\xff\xd8" + b"\xff\xe0" + struct.pack(">H", 4) + b"JF" + b"\xff\xc2" + struct.pack(">HBHH", 11, 8, 6, 11)
    assert (check_image(jpeg).mime, check_image(jpeg).width, check_image(jpeg).height) == ("image/jpeg", 11, 6)


def test_a_30000_square_header_is_refused_before_any_pixel_is_decoded() -> None:
    huge = png_chunks(struct.pack(">IIBBBBB", 30_000, 30_000, 8, 2, 0, 0, 0), b"")
    assert "30000×30000 pixels" in one_line_refusal(huge)


def test_a_decompression_bomb_is_refused_by_its_declared_size() -> None:
    # 100 KB of zlib that inflates to 2.4 GB of pixels, declared 40,000 × 20,000
    rows = zlib.compress(b"\x00" * (10 * 2**20), 9)
    bomb = png_chunks(struct.pack(">IIBBBBB", 40_000, 20_000, 8, 2, 0, 0, 0), rows)
    assert len(bomb) < 200_000
    assert "megapixels are refused" in one_line_refusal(bomb)
    assert 40_000 * 20_000 > MAX_PIXELS


def test_a_non_image_named_png_and_a_cut_header_are_refused() -> None:
    assert "not a PNG, JPEG, GIF or BMP" in one_line_refusal(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3 a document")
    assert "not a PNG, JPEG, GIF or BMP" in one_line_refusal(png(10, 10)[:20])
    assert "empty picture" in one_line_refusal(png_chunks(struct.pack(">IIBBBBB", 0, 5, 8, 2, 0, 0, 0), b""))


def test_data_urls_round_trip_and_nothing_else_is_accepted() -> None:
    picture = png(4, 4)
    url = data_url(picture)
    assert url.startswith("data:image/png;base64,")
    assert from_data_url(url) == picture
    for bad in (
        "https://example.com/cat.png",
        "file:///etc/passwd",
        "data:text/plain;base64,aGk=",
        "data:image/png;base64,@@@",
    ):
        with pytest.raises(ConfigError):
            from_data_url(bad)
    with pytest.raises(ConfigError, match="megapixels"):
        from_data_url(
            "data:image/png;base64,"
            + base64.b64encode(png_chunks(struct.pack(">IIBBBBB", 30_000, 30_000, 8, 2, 0, 0, 0), b"")).decode()
        )


def test_the_remote_backend_sends_images_as_image_url_data_urls(stubs: list[StubServer]) -> None:
    stub = StubServer([Reply([chunk("a cat"), chunk(finish="stop"), DONE])]).start()
    stubs.append(stub)
    picture = png(6, 5)
    request = make_request(
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What is this?", "images": [ImageData(picture, "cat.png")]},
        ]
    )
    backend = OpenAIBackend(stub.url, model="vlm", retry_delays=(0.0,))
    assert backend.capabilities.vision
    text = "".join(p.text for p in backend.stream(request, CancelToken(), StreamInfo()))
    backend.close()
    assert text == "a cat"
    assert stub.requests[0].body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {
                    "type": "image_url",
                    "image_url": {"url": "data:image/png;base64," + base64.b64encode(picture).decode()},
                },
            ],
        },
    ]
