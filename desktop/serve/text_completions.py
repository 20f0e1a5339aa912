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

from desktop.serve.completions import Reply, head, usage_of


def legacy_logprobs(reply: Reply, start: int = 0, *, echoed: bool = True) -> dict[str, Any] | None:
    """The completions API's `logprobs`: parallel lists (None when not asked) of the generated
    tokens from token `start` on, after the prompt's own when it is scored and `echoed` here.

    `text_offset` indexes the prompt and the reply as one text, echoed or not (as OpenAI and
    llama-cpp-python give it); a scored prompt's first token has no logprob (null), as OpenAI's.
    """
    if reply.call.logprobs is None:
        return None
    tokens: list[str] = []
    values: list[float | None] = []
    tops: list[dict[str, float] | None] = []
    offsets: list[int] = []
    if echoed:
        at = 0
        for i, entry in enumerate(reply.prompt_logprobs):
            tokens.append(entry.token)
            values.append(entry.logprob if i else None)
            tops.append({a.token: a.logprob for a in entry.top} if i else None)
            offsets.append(at)
            at += len(entry.token)
    at = len(reply.call.prompt or "") + sum(len(t.token) for t in reply.logprobs[:start])
    for entry in reply.logprobs[start:]:
        tokens.append(entry.token)
        values.append(entry.logprob)
        tops.append({a.token: a.logprob for a in entry.top})
        offsets.append(at)
        at += len(entry.token)
    return {"tokens": tokens, "token_logprobs": values, "top_logprobs": tops, "text_offset": offsets}


@dataclass(slots=True)
class TextEnvelope:
    """What every response and chunk of one text completion shares."""

    model: str
    id: str = field(default_factory=lambda: f"cmpl-{uuid.uuid4().hex[:24]}")
    created: int = field(default_factory=lambda: int(time.time()))
    _sent: dict[int, int] = field(default_factory=dict[int, int])  # logprobs already streamed, per choice
    _echoed: set[int] = field(default_factory=set[int])  # choices whose prompt a chunk carried

    def completion(self, replies: list[Reply]) -> dict[str, Any]:
        return {
            **head("text_completion", self.id, self.created, self.model),
            "choices": [
                {
                    "index": r.index,
                    "text": _text(r),
                    "finish_reason": r.finish_reason,
                    "logprobs": legacy_logprobs(r, echoed=r.call.echo),
                }
                for r in replies
            ],
            "usage": _plain_usage(replies),
        }

    def opening(self, reply: Reply) -> dict[str, Any] | None:
        """No chunk of its own: an echoed prompt comes with the first chunk, beside its scores
        (which the model gives with its first token, or alone with `max_tokens: 0`)."""
        return None

    def chunk(self, reply: Reply, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        text = str(delta.get("content") or "")
        echo = reply.call.echo and reply.index not in self._echoed
        if echo:
            self._echoed.add(reply.index)
            text = (reply.call.prompt or "") + text
        start = self._sent.get(reply.index, 0)
        self._sent[reply.index] = len(reply.logprobs)
        return {
            **head("text_completion", self.id, self.created, self.model),
            "choices": [
                {
                    "index": reply.index,
                    "text": text,
                    "finish_reason": finish_reason,
                    "logprobs": legacy_logprobs(reply, start, echoed=echo),
                }
            ],
        }

    def usage_chunk(self, replies: list[Reply]) -> dict[str, Any]:
        return {
            **head("text_completion", self.id, self.created, self.model),
            "choices": [],
            "usage": _plain_usage(replies),
        }


def _text(reply: Reply) -> str:
    text = "".join(reply.content)
    return (reply.call.prompt or "") + text if reply.call.echo else text


def _plain_usage(replies: list[Reply]) -> dict[str, Any]:
    usage = usage_of(replies)
    return {k: usage[k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
