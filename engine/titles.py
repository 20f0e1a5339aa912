"""Conversation titles: a short model-written title, or the first words of the question.

The first-words rule is `engine.history.title_from_text` (six words, Markdown dropped): the
store names a conversation with it at its first message, and it is the fallback here.

    title = make_title(backend, first_user, first_reply)   # on the thread owning the backend

The model is asked for `{"title": "..."}` through `run_structured` (grammar-constrained on
the in-process backend), greedily so the same conversation always gets the same title.
"""

from __future__ import annotations

import logging
from typing import Any

from engine.backend import Backend, CancelToken, Message, Sampling
from engine.errors import StructuredOutputError
from engine.history import TITLE_MAX_CHARS, title_from_text
from engine.structured import run_structured

log = logging.getLogger("engine.titles")

TITLE_MAX_TOKENS = 32
# Only the start of the exchange is shown to the model: enough to name it, and the prompt
# stays small on a slow CPU.
EXCERPT_CHARS = 600

TITLE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"title": {"type": "string", "minLength": 1, "maxLength": TITLE_MAX_CHARS}},
    "required": ["title"],
    "additionalProperties": False,
}
SYSTEM = "You name conversations. A title is a few plain words that say what the conversation is about."
PROMPT = (
    "Write a title of at most six words for this conversation.\n\n"
    "User: {user}\n\nAssistant: {reply}"
)


def make_title(backend: Backend, first_user: str, first_reply: str, *, cancel: CancelToken | None = None) -> str:
    """A title for the conversation; the first words of `first_user` when the model fails.

    Only StructuredOutputError falls back: a backend error (context full, transport) is
    raised as is, for the caller to handle like any other failed request.
    """
    messages: list[Message] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": PROMPT.format(user=_excerpt(first_user), reply=_excerpt(first_reply))},
    ]
    try:
        value = run_structured(backend, messages, TITLE_SCHEMA, sampling=Sampling.greedy(),
                               max_tokens=TITLE_MAX_TOKENS, cancel=cancel)
    except StructuredOutputError as exc:
        log.info("no model title (%s); using the first words of the message", exc)
        return title_from_text(first_user)
    title = _clean(str(value["title"]))
    return title or title_from_text(first_user)


def _clean(title: str) -> str:
    """One line, no surrounding quotes or trailing full stop: a title, not a sentence."""
    return " ".join(title.split()).strip("\"'").rstrip(".").strip()


def _excerpt(text: str) -> str:
    text = text.strip()
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS].rstrip() + "…"
