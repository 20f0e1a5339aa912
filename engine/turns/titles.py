"""Conversation titles: a short model-written title, or the first words of the question.

The first-words rule is `engine.history.store.title_from_text` (six words, Markdown dropped): the
store names a conversation with it at its first message, and it is the fallback here.

    title = title_from(TurnRunner(backend).run(title_request(user, reply)), user, reply)   # on the model's thread

The model is asked for `{"title": "..."}` in a structured turn (grammar-constrained on a
backend with the grammar capability); the GUI runs that turn on the engine like any other.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from engine.backends.base import Message, Request, Sampling, make_request
from engine.events import Event, StructuredValue, TurnError
from engine.history.store import TITLE_MAX_CHARS, title_from_text

log = logging.getLogger("engine.titles")

TITLE_MAX_TOKENS = 32
TITLE_MAX_WORDS = 8  # six are asked for; a little slack before it is a sentence, not a title
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
PROMPT = "Write a title of at most six words for this conversation.\n\nUser: {user}\n\nAssistant: {reply}"


def title_request(first_user: str, first_reply: str) -> Request:
    """The structured turn that asks for `{"title": ...}`, greedily so a conversation always gets the same one."""
    messages: list[Message] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": PROMPT.format(user=_excerpt(first_user), reply=_excerpt(first_reply))},
    ]
    return make_request(messages, sampling=Sampling.greedy(), max_tokens=TITLE_MAX_TOKENS, schema=TITLE_SCHEMA)


def title_from(events: Iterable[Event], first_user: str, first_reply: str = "") -> str:
    """The title a title turn's events give; the first words of `first_user` when it fails,
    or when what came back is not a title (see `_is_title`)."""
    for event in events:
        if isinstance(event, StructuredValue):
            title = _clean(str(event.value["title"]))
            if _is_title(title, first_reply):
                return title
            log.info("the model's title %r is not a title; using the first words of the message", title)
            return title_from_text(first_user)
        if isinstance(event, TurnError):
            log.info("no model title (%s); using the first words of the message", event.message)
    return title_from_text(first_user)


def _is_title(title: str, reply: str) -> bool:
    """A fixed rule, not a judgement: a few words, not the opening of the reply copied out.

    Small models (the built-in 135M one) often answer the title request with the start of
    their answer ("The capital of France is Paris, capital city of"); the question's first
    words name the conversation better than that.
    """
    words = title.split()
    if not words or len(words) > TITLE_MAX_WORDS:
        return False
    copied = " ".join(reply.split()).casefold().startswith(" ".join(words).casefold())
    return not (copied and len(words) >= 5)


def _clean(title: str) -> str:
    """One line, no surrounding quotes or trailing full stop: a title, not a sentence."""
    return " ".join(title.split()).strip("\"'").rstrip(".").strip()


def _excerpt(text: str) -> str:
    text = text.strip()
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS].rstrip() + "…"
