"""Context trimming: fit a conversation into a token budget by dropping its oldest turns.

A turn is a user message and everything that follows it up to the next user message
(assistant replies, tool results). Turns are dropped whole and oldest first, so the model
never sees an answer without its question. The system message is always kept, and so is
the newest turn: it holds the message being answered, and sending a prompt without it
would be worse than overflowing (the backend then reports the overflow plainly).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from engine.backend import Message

# Role markers and separators a chat template adds around each message's text.
MESSAGE_OVERHEAD_TOKENS = 4

TokenCounter = Callable[[str], int]


def approx_tokens(text: str) -> int:
    """A model-free estimate (about four characters a token) for backends that cannot count."""
    return len(text) // 4 + 1


def message_tokens(message: Message, count_tokens: TokenCounter) -> int:
    return count_tokens(str(message.get("content") or "")) + MESSAGE_OVERHEAD_TOKENS


def trim_messages(messages: Sequence[Message], budget_tokens: int, count_tokens: TokenCounter) -> list[Message]:
    """The system message plus the newest whole turns whose tokens fit `budget_tokens`.

    Turns are kept newest first and the cut is contiguous: once a turn does not fit, no
    older (possibly smaller) turn is kept, so the conversation never has holes.
    """
    system = [dict(m) for m in messages[:1] if m.get("role") == "system"]
    used = sum(message_tokens(m, count_tokens) for m in system)
    kept: list[list[Message]] = []
    for turn in reversed(_turns(messages[len(system):])):
        cost = sum(message_tokens(m, count_tokens) for m in turn)
        if kept and used + cost > budget_tokens:
            break
        kept.append(turn)
        used += cost
    return system + [m for turn in reversed(kept) for m in turn]


def _turns(messages: Sequence[Message]) -> list[list[Message]]:
    """Split at each user message; anything before the first user message is its own turn."""
    turns: list[list[Message]] = []
    for message in messages:
        if message.get("role") == "user" or not turns:
            turns.append([])
        turns[-1].append(dict(message))
    return turns
