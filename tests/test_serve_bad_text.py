"""Text that is not text (SV-26…28): lone surrogates and bytes that are not UTF-8 are a 400 in one line.

A lone surrogate (`"\\ud800"`) is valid JSON but cannot be encoded for a model, a reply or the
history: the request is refused naming the field, with no traceback in the log, and the
server keeps serving.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

import httpx
import pytest
from serve_helpers import EchoBackend, Served, serve


class Utf8Embedder:
    """Encodes its input as llama.cpp's tokenizer does (UTF-8), so a surrogate would fail inside it."""

    name = "/models/utf8-embed.gguf"
    dimensions = 2
    max_tokens = 64

    def count_tokens(self, text: str) -> int:
        return len(text.encode("utf-8")) // 4 + 1

    def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        return [[1.0, 0.0] if t.encode("utf-8") else [0.0, 1.0] for t in texts]

    def close(self) -> None:
        pass


@pytest.fixture
def served() -> Iterator[Served]:
    s = serve(EchoBackend(), embedder=Utf8Embedder())
    yield s
    s.close()


def _post(s: Served, path: str, raw: bytes) -> httpx.Response:
    return httpx.post(f"{s.url}/{path}", content=raw, headers={"content-type": "application/json"}, timeout=30)


def _one_line_400(reply: httpx.Response) -> dict[str, str]:
    assert reply.status_code == 400, reply.text[:300]
    error = reply.json()["error"]
    assert "\n" not in error["message"]
    return error


@pytest.mark.parametrize(
    ("path", "raw", "param"),
    [
        (
            "chat/completions",
            rb'{"messages": [{"role": "user", "content": "hi \ud800 lone \udfff"}], "max_tokens": 5}',
            "messages[0].content",
        ),
        (
            "chat/completions",
            rb'{"messages": [{"role": "user", "content": [{"type": "text", "text": "\udc00"}]}]}',
            "messages[0].content[0].text",
        ),
        ("chat/completions", rb'{"messages": [{"role": "user", "content": "hi"}], "stop": ["\ud83d"]}', "stop[0]"),
        ("embeddings", rb'{"input": "\ud800"}', "input"),
        ("embeddings", rb'{"input": ["fine", "\udfff x"]}', "input[1]"),
    ],
)
def test_a_lone_surrogate_is_a_400_naming_the_field(
    served: Served, path: str, raw: bytes, param: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        error = _one_line_400(_post(served, path, raw))
    assert error["param"] == param and "surrogate" in error["message"]
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    paired = _post(served, "chat/completions", rb'{"messages": [{"role": "user", "content": "ok \ud83d\ude00"}]}')
    assert paired.status_code == 200 and paired.json()["choices"][0]["message"]["content"] == "echo: ok \U0001f600"


@pytest.mark.parametrize("raw", [b'\xff\xfe{"messages": []}', b'{"messages": [{"role": "user", "content": "\xc3"}]}'])
def test_a_body_that_is_not_utf8_says_so(served: Served, raw: bytes) -> None:
    error = _one_line_400(_post(served, "chat/completions", raw))
    assert "not UTF-8" in error["message"] and "nested" not in error["message"]


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
def test_a_huge_number_is_not_called_deep_nesting(served: Served) -> None:
    error = _one_line_400(_post(served, "chat/completions", b'{"max_tokens": ' + b"9" * 5000 + b"}"))
    assert "digits" in error["message"]
