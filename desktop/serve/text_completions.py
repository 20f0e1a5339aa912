"""`/v1/completions`' response shapes: a raw prompt's continuation as OpenAI's legacy completions
return it (`text`, `echo`, the legacy `logprobs` object), whole or as stream chunks.

The turn itself is a chat call without messages (`wire.parse_completion`): the same line, job and
`Reply` as chat completions; only the envelope differs.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from desktop.serve.completions import Reply, usage_of


def legacy_logprobs(reply: Reply, start: int = 0) -> dict[str, Any] | None:
    """The completions API's `logprobs`: parallel lists from token `start` on (None when not asked).

    With `echo`, the prompt's tokens are not scored: the lists cover the generated tokens.
    """
    if reply.call.logprobs is None:
        return None
    entries = reply.logprobs[start:]
    offset = len(reply.call.prompt or "") if reply.call.echo else 0
    offset += sum(len(t.token) for t in reply.logprobs[:start])
    offsets: list[int] = []
    for entry in entries:
        offsets.append(offset)
        offset += len(entry.token)
    return {
        "tokens": [t.token for t in entries],
        "token_logprobs": [t.logprob for t in entries],
        "top_logprobs": [{a.token: a.logprob for a in t.top} for t in entries],
        "text_offset": offsets,
    }


@dataclass(slots=True)
class TextEnvelope:
    """What every response and chunk of one text completion shares."""

    model: str
    id: str = field(default_factory=lambda: f"cmpl-{uuid.uuid4().hex[:24]}")
    created: int = field(default_factory=lambda: int(time.time()))
    _sent: dict[int, int] = field(default_factory=dict[int, int])  # logprobs already streamed, per choice

    def completion(self, replies: list[Reply]) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {"index": r.index, "text": _text(r), "finish_reason": r.finish_reason, "logprobs": legacy_logprobs(r)}
                for r in replies
            ],
            "usage": _plain_usage(replies),
        }

    def opening(self, reply: Reply) -> dict[str, Any] | None:
        """The first chunk: the prompt, when echoed."""
        return self._chunk(reply, reply.call.prompt or "", None) if reply.call.echo else None

    def chunk(self, reply: Reply, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return self._chunk(reply, str(delta.get("content") or ""), finish_reason)

    def _chunk(self, reply: Reply, text: str, finish_reason: str | None) -> dict[str, Any]:
        start = self._sent.get(reply.index, 0)
        self._sent[reply.index] = len(reply.logprobs)
        return {
            "id": self.id,
            "object": "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": reply.index,
                    "text": text,
                    "finish_reason": finish_reason,
                    "logprobs": legacy_logprobs(reply, start),
                }
            ],
        }

    def usage_chunk(self, replies: list[Reply]) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": _plain_usage(replies),
        }


def _text(reply: Reply) -> str:
    text = "".join(reply.content)
    return (reply.call.prompt or "") + text if reply.call.echo else text


def _plain_usage(replies: list[Reply]) -> dict[str, Any]:
    usage = usage_of(replies)
    return {k: usage[k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
