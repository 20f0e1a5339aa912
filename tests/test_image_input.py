"""Images before any decoder: kind and size from the header, bounds, data URLs, the wire shape."""

from __future__ import annotations

import base64
import struct
import zlib
from pathlib import Path

import pytest
from sse_stub import DONE, Reply, StubServer, chunk

from engine.backends.base import StreamInfo, make_request
from engine.backends.image_input import MAX_PIXELS, ImageData, check_image, data_url, from_data_url
from engine.backends.openai import OpenAIBackend
from engine.cancel import CancelToken
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


def _jpeg_with_big_exif(exif_bytes: int) -> bytes:
    """A real JPEG (Pillow) with `exif_bytes` of APP1 segments (≤ 64 KB each, as in a camera's
    EXIF and XMP) between SOI and its frame header."""
    import io

    pil = pytest.importorskip("PIL.Image")
    buf = io.BytesIO()
    pil.new("RGB", (33, 21), "red").save(buf, "JPEG")
    jpeg = buf.getvalue()
    segments = b""
    while exif_bytes > 0:
        payload = b"Exif\x00\x00" + b"\x00" * min(exif_bytes, 65_000)
        segments += b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload
        exif_bytes -= 65_000
    return jpeg[:2] + segments + jpeg[2:]


def test_a_jpeg_with_a_large_exif_block_before_its_frame_is_a_picture(tmp_path: Path) -> None:
    from engine.backends.image_input import read_image_file, sniff_file

    photo = tmp_path / "IMG_0001.JPG"
    photo.write_bytes(_jpeg_with_big_exif(300_000))  # the frame header lies past the first 64 KB
    assert photo.read_bytes().index(b"\xff\xc0") > 300_000
    info = sniff_file(photo)
    assert info is not None and (info.mime, info.width, info.height) == ("image/jpeg", 33, 21)
    assert _is_picture(photo)
    assert read_image_file(photo).data == photo.read_bytes()


def test_a_jpeg_whose_segment_runs_past_its_end_is_not_a_picture(tmp_path: Path) -> None:
    whole = _jpeg_with_big_exif(300_000)
    cut = tmp_path / "cut.jpg"
    cut.write_bytes(whole[:200_000])  # inside the EXIF segments: no frame header to find
    assert not _is_picture(cut)
    lying = tmp_path / "lying.jpg"
    lying.write_bytes(b"\xff\xd8\xff\xe1\xff\xff" + b"\x00" * 100)  # a segment longer than the file
    assert not _is_picture(lying)
    fill = tmp_path / "fill.jpg"
    fill.write_bytes(b"\xff\xd8" + b"\xff" * 300_000)  # fill bytes only: the walk is bounded
    assert not _is_picture(fill)
    text = tmp_path / "notes.png"
    text.write_text("not a picture")
    assert not _is_picture(text)
    assert _is_picture(_write(tmp_path / "small.png", png(4, 3)))


def _is_picture(path: Path) -> bool:
    """What the window's drop asks of a file: does its header say it is a picture?"""
    from desktop.core.pending_images import sort_dropped

    return sort_dropped([path])[0].image is not None


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path
