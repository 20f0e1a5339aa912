"""Token ids to text: whole pieces, whole characters, and token classes."""

from __future__ import annotations

import codecs
import ctypes
from typing import Any

# llama_token_attr bits (llama.h)
ATTR_UNKNOWN = 1
ATTR_NORMAL = 4
ATTR_CONTROL = 8
ATTR_USER_DEFINED = 16


def piece_bytes(vocab: Any, token: int, *, special: bool = True) -> bytes:
    """A token's bytes, however long.

    llama-cpp-python's own detokenizer uses a 32-byte buffer and silently drops longer
    pieces (#2362); calling the C function with a growing buffer keeps them.
    """
    import llama_cpp as lc

    size = 64
    while True:
        buf = ctypes.create_string_buffer(size)
        n = lc.llama_token_to_piece(vocab, token, buf, size, 0, special)
        if n >= 0:
            return buf.raw[:n]
        size = -n


class Utf8Stream:
    """An incremental UTF-8 decoder for one reply: a character split over tokens comes out once."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def feed(self, data: bytes) -> str:
        return self._decoder.decode(data)

    def flush(self) -> str:
        return self._decoder.decode(b"", final=True)


class TokenClasses:
    """Per-model cache of each token's class (special or not, user-defined or not)."""

    def __init__(self, vocab: Any) -> None:
        import llama_cpp as lc

        self._vocab = vocab
        self._attr = lc.llama_vocab_get_attr
        self._is_eog = lc.llama_vocab_is_eog
        self._cache: dict[int, tuple[bool, bool, bool]] = {}

    def classify(self, token: int) -> tuple[bool, bool, bool]:
        """(end_of_generation, special, user_defined) for a token id."""
        hit = self._cache.get(token)
        if hit is None:
            attr = int(self._attr(self._vocab, token))
            eog = bool(self._is_eog(self._vocab, token))
            user_defined = bool(attr & ATTR_USER_DEFINED)
            special = user_defined or bool(attr & ATTR_CONTROL)
            hit = (eog, special, user_defined)
            self._cache[token] = hit
        return hit
