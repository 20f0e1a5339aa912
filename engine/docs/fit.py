"""Documents in a turn's messages, measured by the backend's own template and tokenizer.

    messages, ctx = with_documents(backend, messages, sources, max_tokens)
    events = chain([Sources(ctx.passages)], run_turn(messages))

The newest user message becomes the instruction, the numbered passages and the question
(`engine.docs.context`). Its room is the context less the reply's reserve and less the
conversation before it (at most a quarter of the room: documents asked about now come
before old turns, which the context policy then trims as usual). Measured exactly through
the model's template when the backend can count; a backend that cannot (a remote server)
gets at most `UNMEASURED_CHARS` of passages.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from engine.backends.base import Backend, Message
from engine.docs.context import CHARS_PER_TOKEN_BOUND, DocContext, build_context
from engine.docs.sources import DocSource
from engine.turns.context_policy import reply_reserve
from engine.turns.context_window import counter_for

UNMEASURED_CHARS = 24_000  # about 6k tokens: what a remote server of unknown context is sent
# The question with its passages takes at most this share of the context: long prompts cost time
# before the first token (21-39 s for 3,000 tokens on the built-in model on a busy 2-core machine)
# and a small model reads a few good passages better than many.
DOC_SHARE = 0.5
SMALL_DOC_SHARE = 0.25  # a model file under SMALL_MODEL_BYTES (the built-in SmolLM2 is 90 MB)
SMALL_MODEL_BYTES = 2 << 30


def doc_share(backend: Backend) -> float:
    path = getattr(backend, "path", None)
    try:
        small = isinstance(path, Path) and path.stat().st_size < SMALL_MODEL_BYTES
    except OSError:
        small = False
    return SMALL_DOC_SHARE if small else DOC_SHARE


def with_documents(
    backend: Backend, messages: Sequence[Message], sources: Sequence[DocSource], max_tokens: int
) -> tuple[list[Message], DocContext]:
    """`messages` with the last (user) message carrying the documents' passages that fit."""
    question = messages[-1]["content"]
    head = [m for m in messages[:1] if m["role"] == "system"]
    counter = counter_for(backend)
    if counter is None:
        ctx = build_context(question, sources, lambda c: len(c) <= UNMEASURED_CHARS, max_chars=UNMEASURED_CHARS)
    else:
        room = counter.n_ctx - reply_reserve(counter.n_ctx, max_tokens)
        alone = counter.prompt_tokens([*head, messages[-1]])
        before = max(0, counter.prompt_tokens(messages) - alone) if len(messages) > len(head) + 1 else 0
        limit = min(room - min(before, room // 4), int(counter.n_ctx * doc_share(backend)))

        def fits(content: str) -> bool:
            return counter.prompt_tokens([*head, {"role": "user", "content": content}]) <= limit

        ctx = build_context(question, sources, fits, max_chars=max(0, limit) * CHARS_PER_TOKEN_BOUND)
    return [*messages[:-1], {"role": "user", "content": ctx.content}], ctx
