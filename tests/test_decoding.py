"""UTF-8 assembly across tokens, long pieces, and token classes."""

from __future__ import annotations

from engine.llama.decoding import Utf8Stream


def test_a_character_split_over_tokens_comes_out_once_whole() -> None:
    data = "é中😀".encode()
    stream = Utf8Stream()
    out = [stream.feed(data[i : i + 1]) for i in range(len(data))]
    assert "".join(out) == "é中😀"
    assert all(chunk in ("", "é", "中", "😀") for chunk in out)
    assert stream.flush() == ""


def test_invalid_bytes_are_replaced_not_dropped() -> None:
    stream = Utf8Stream()
    text = stream.feed(b"a\xffb") + stream.feed("ü".encode()[:1]) + stream.flush()
    assert text == "a\ufffdb\ufffd"


def test_a_dangling_partial_character_is_flushed_at_the_end() -> None:
    stream = Utf8Stream()
    assert stream.feed("€".encode()[:2]) == ""
    assert stream.flush() == "\ufffd"
