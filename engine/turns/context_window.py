"""Applying a context policy with a real backend: its token counting, its context size.

A backend that can count declares it in its capabilities: `token_count` (its
``count_prompt_tokens(messages)``, through its chat template and tokenizer, and
``count_tokens(text)`` are its own counts) and `context_size`. `LlamaBackend` counts exactly;
`ScriptedBackend` counts words when given a context size; a remote server declares neither (its
context is unknown), so its conversations are sent whole, as before.

Counting only reads the vocabulary and the template, never the model's KV cache, so it may
run on a thread beside a streaming reply (`engine.runtime.Engine.measure`).
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from engine.backends.base import Backend, Message
from engine.errors import ConfigError, ContextOverflowError
from engine.turns.context_policy import (
    ContextPolicy,
    Fit,
    MessageTooLongError,
    TokenCounter,
    fit_messages,
    reply_reserve,
    unmeasured,
)
from engine.turns.runner import longest_turn_messages

TextCache = OrderedDict[str, int]
# Per backend, kept across turns; weak, so an unloaded model's cache goes with it.
_CACHES: weakref.WeakKeyDictionary[Backend, TextCache] = weakref.WeakKeyDictionary()
CACHE_SIZE = 8192  # texts whose token counts are remembered (the window's grid recounts every turn)


class BackendCounter:
    """A `TokenCounter` over a counting backend, remembering the counts of texts it has seen."""

    def __init__(self, backend: Backend, cache: TextCache | None = None) -> None:
        self.backend = backend
        self.n_ctx = backend.capabilities.context_size
        self._texts: TextCache = OrderedDict() if cache is None else cache

    def prompt_tokens(self, messages: Sequence[Message]) -> int:
        # Measured as the turn sends it: with the runner's own lines folded into the system
        # message (the recovery round's too, the longest prompt a turn can send).
        return self.backend.count_prompt_tokens(longest_turn_messages(tuple(messages)))

    def text_tokens(self, text: str) -> int:
        known = self._texts.get(text)
        if known is not None:
            self._texts.move_to_end(text)
            return known
        count = self.backend.count_tokens(text)
        self._texts[text] = count
        if len(self._texts) > CACHE_SIZE:
            self._texts.popitem(last=False)
        return count


def counter_for(backend: Backend) -> BackendCounter | None:
    """A counter for `backend`, or None when it cannot count or its context is unknown."""
    caps = backend.capabilities
    if not caps.token_count or caps.context_size <= 0:
        return None
    try:
        cache = _CACHES.setdefault(backend, OrderedDict())
    except TypeError:  # not weakly referable: no shared cache, still correct
        cache = None
    return BackendCounter(backend, cache)


def fit_for(backend: Backend, messages: Sequence[Message], policy: ContextPolicy, max_tokens: int) -> Fit:
    """`messages` fitted to `backend`'s context under `policy` (all of them when it cannot count)."""
    counter = counter_for(backend)
    if counter is None:
        return unmeasured(messages)
    return fit_messages(messages, policy, counter, n_ctx=counter.n_ctx, max_tokens=max_tokens)


@dataclass(frozen=True, slots=True)
class Meter:
    """What the composer's token meter shows: the next prompt's size against the context."""

    used: int  # tokens the next request would send (the conversation as the policy keeps it + the draft)
    n_ctx: int
    draft: int  # tokens of the draft alone
    reserve: int  # kept free for the reply
    problem: str = ""  # why the draft would be refused (empty: it would be sent)

    @property
    def text(self) -> str:
        return f"{self.used:,} / {self.n_ctx:,}"


def measure_draft(backend: Backend, messages: Sequence[Message], draft: str, policy: ContextPolicy,
                  max_tokens: int) -> Meter | None:
    """The meter for `draft` typed after `messages`; None when the backend cannot count."""
    counter = counter_for(backend)
    if counter is None:
        return None
    n_ctx = counter.n_ctx
    reserve = reply_reserve(n_ctx, max_tokens)
    draft_tokens = counter.text_tokens(draft) if draft else 0
    candidate = [*messages, {"role": "user", "content": draft}] if draft.strip() else list(messages)
    if not candidate:
        return Meter(0, n_ctx, 0, reserve)
    try:
        fit = fit_messages(candidate, policy, counter, n_ctx=n_ctx, max_tokens=max_tokens)
    except MessageTooLongError as exc:
        return Meter(exc.tokens, n_ctx, draft_tokens, reserve, str(exc))
    except (ContextOverflowError, ConfigError) as exc:  # full under stop, or a template that fails
        return Meter(_whole(counter, candidate), n_ctx, draft_tokens, reserve, str(exc))
    return Meter(fit.prompt_tokens, n_ctx, draft_tokens, reserve)


def check_message(backend: Backend, messages: Sequence[Message], policy: ContextPolicy, max_tokens: int) -> str:
    """Why the newest message in `messages` must be refused ("" when it may be sent).

    Only a message that cannot fit even alone is refused here; a conversation that is full
    under the stop policy is reported by the turn itself (with its action).
    """
    try:
        fit_for(backend, messages, ContextPolicy.ROLLING if policy is ContextPolicy.STOP else policy, max_tokens)
    except MessageTooLongError as exc:
        return str(exc)
    return ""


def _whole(counter: TokenCounter, messages: Sequence[Message]) -> int:
    try:
        return counter.prompt_tokens(messages)
    except ConfigError:
        return 0
