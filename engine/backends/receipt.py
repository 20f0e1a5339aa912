"""A reply's receipt: what is needed to reproduce it, filled in by the backend that made it.

    {"backend": "llama.cpp", "llama_cpp_python": "0.3.36", "device": "CPU · 8 threads",
     "model": {"file": "SmolLM2-135M-Instruct.Q4_1.gguf", "bytes": 94...,"sha256": "…"},
     "chat_template_sha256": "…", "sampling": {"temperature": 0.0, …}, "seed": 0,
     "max_tokens": 512, "system": "…the system message as sent…",
     "prompt": {"tokens": 31, "sha256": "…"}, "reply": {"tokens": 8, "sha256": "…"},
     "grammar": false, "tools": false}

Token digests hash the token ids (4-byte little-endian each), so two replies match token for
token exactly when their digests do. The receipt travels in `TurnStats.receipt`, so the
recorder keeps it with the reply (its stats) and the JSON export carries it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from typing import Any

from engine.backends.base import Message, Request, Sampling


class TokenDigest:
    """SHA-256 over token ids, fed one id at a time."""

    def __init__(self, ids: Iterable[int] = ()) -> None:
        self._sha = hashlib.sha256()
        self.count = 0
        for token in ids:
            self.add(token)

    def add(self, token: int) -> None:
        self._sha.update(token.to_bytes(4, "little", signed=True))
        self.count += 1

    def to_json(self) -> dict[str, Any]:
        return {"tokens": self.count, "sha256": self._sha.hexdigest()}


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sampling_json(sampling: Sampling) -> dict[str, Any]:
    """The sampling settings without the seed (the receipt keeps the seed actually used)."""
    out = {k: v for k, v in asdict(sampling).items() if k != "seed"}
    for penalty in ("frequency_penalty", "presence_penalty"):  # OpenAI's: named only when used
        if not out[penalty]:
            del out[penalty]
    return out


def system_text(messages: Sequence[Message]) -> str | None:
    first = messages[0] if messages else None
    return str(first.get("content") or "") if first is not None and first.get("role") == "system" else None


def request_receipt(request: Request, seed: int | None) -> dict[str, Any]:
    """The request's part of a receipt (every backend's): sampling, seed, limits, system message."""
    return {
        "sampling": sampling_json(request.sampling),
        "seed": seed,
        "max_tokens": request.max_tokens,
        "system": system_text(request.messages),
        "grammar": request.grammar is not None,
        "tools": bool(request.tools),
    }
