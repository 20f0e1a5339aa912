"""Applying a context policy with a real backend: its token counting, its context size.

What is measured is the request a turn actually sends: its messages as the runner's first
round sends them (`engine.turns.runner.sent_messages`) with the tools offered, their
descriptions included; the recovery round's extra line is kept free as headroom. A
`verbatim` request (the API server's) is measured as it is, never cut: the request is the
prompt, and one that does not fit the context is refused (`ContextFullError`) by the same fit.

A backend that can count declares it in its capabilities: `token_count` (its
``count_prompt_tokens(messages, tools)``, through its chat template and tokenizer, and
``count_tokens(text)`` are its own counts) and `n_ctx`. `LlamaBackend` counts exactly;
`ScriptedBackend` counts words when given a context size; a remote server declares neither (its
context is unknown), so its conversations are sent whole, as before.

Counting only reads the vocabulary and the template, never the model's KV cache, so it may
run on a thread beside a streaming reply (`engine.runtime.Engine.measure`).
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.backends.base import MAX_CHARS_PER_TOKEN, Backend, Message, Request, ToolSpec
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
from engine.turns.runner import CORRECTION_LINE, sent_messages

TextCache = OrderedDict[str, int]
# Per backend, kept across turns; weak, so an unloaded model's cache goes with it.
_CACHES: weakref.WeakKeyDictionary[Backend, TextCache] = weakref.WeakKeyDictionary()
CACHE_SIZE = 8192  # texts whose token counts are remembered (the window's grid recounts every turn)
RECOVERY_MARGIN = 4  # the blank line that joins the correction line, and a tokenizer's seams
VERBATIM_RESERVE = 1  # an API request's prompt must leave the reply one token, as the backend checks


class BackendCounter:
    """A `TokenCounter` over a counting backend, remembering the counts of texts it has seen.

    It measures a prompt as the turn sends it: with the runner's own line folded into the
    system message and with `tools` (the tools' descriptions count against the context too);
    `verbatim`, as the API server sends it: nothing folded in, and no recovery round.
    """

    def __init__(
        self,
        backend: Backend,
        cache: TextCache | None = None,
        tools: tuple[ToolSpec, ...] | None = None,
        *,
        verbatim: bool = False,
    ) -> None:
        self.backend = backend
        self.n_ctx = backend.capabilities.n_ctx
        self.tools = tools or None
        self.verbatim = verbatim
        self._texts: TextCache = OrderedDict() if cache is None else cache

    def prompt_tokens(self, messages: Sequence[Message]) -> int:
        sent = tuple(messages) if self.verbatim else sent_messages(tuple(messages), self.tools)
        return self.backend.count_prompt_tokens(sent, self.tools)

    def recovery_headroom(self) -> int:
        """Tokens the recovery round may add to the prompt: its correction line, folded in."""
        return 0 if self.verbatim else self.text_tokens(CORRECTION_LINE) + RECOVERY_MARGIN

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


def counter_for(
    backend: Backend, tools: tuple[ToolSpec, ...] | None = None, *, verbatim: bool = False
) -> BackendCounter | None:
    """A counter for `backend` (offering `tools`), or None when it cannot count or its context is unknown."""
    caps = backend.capabilities
    if not caps.token_count or caps.n_ctx <= 0:
        return None
    try:
        cache = _CACHES.setdefault(backend, OrderedDict())
    except TypeError:  # not weakly referable: no shared cache, still correct
        cache = None
    return BackendCounter(backend, cache, tools, verbatim=verbatim)


def fit_for(
    backend: Backend,
    messages: Sequence[Message],
    policy: ContextPolicy,
    max_tokens: int,
    tools: tuple[ToolSpec, ...] | None = None,
    *,
    verbatim: bool = False,
) -> Fit:
    """`messages` fitted to `backend`'s context under `policy` (all of them when it cannot count)."""
    counter = counter_for(backend, tools, verbatim=verbatim)
    if counter is None:
        return unmeasured(messages)
    return fit_messages(
        messages, policy, counter, n_ctx=counter.n_ctx, max_tokens=max_tokens, headroom=counter.recovery_headroom()
    )


def fit_request(backend: Backend, request: Request, policy: ContextPolicy) -> tuple[Request, Fit]:
    """`request` with its messages fitted to `backend`'s context: the request a turn sends.

    Raises the policy's `ContextOverflowError`s (and `ConfigError` for a template that fails).
    A `verbatim` request is sent as it is or refused, whatever `policy`: its reply takes the room
    the prompt leaves (the backend stops there), so only the prompt itself must fit.
    """
    if request.verbatim:
        fit = fit_for(backend, request.messages, ContextPolicy.STOP, VERBATIM_RESERVE, request.tools, verbatim=True)
        return request, fit
    fit = fit_for(backend, request.messages, policy, request.max_tokens, request.tools)
    return request.with_(messages=fit.messages), fit


# Puts documents into the last (user) message, measured by the backend: (backend, messages, max_tokens).
WithDocuments = Callable[[Backend, list[Message], int], list[Message]]


@dataclass(frozen=True, slots=True)
class Meter:
    """What the composer's token meter shows: the next prompt's size against the context."""

    used: int  # tokens the next request would send (the conversation as the policy keeps it + the draft)
    n_ctx: int
    draft: int  # tokens of the draft alone
    reserve: int  # kept free for the reply
    problem: str = ""  # why the draft would be refused (empty: it would be sent)
    documents: int = 0  # tokens the attached documents' passages add to the draft

    @property
    def text(self) -> str:
        return f"{self.used:,} / {self.n_ctx:,}"


def measure_draft(
    backend: Backend,
    messages: Sequence[Message],
    draft: str,
    policy: ContextPolicy,
    max_tokens: int,
    tools: tuple[ToolSpec, ...] | None = None,
    documents: WithDocuments | None = None,
) -> Meter | None:
    """The meter for `draft` typed after `messages`; None when the backend cannot count.

    `documents` puts the files attached to the next message (and its collection's passages)
    into the draft as the turn will, so they are counted too, even before anything is typed.
    """
    counter = counter_for(backend, tools)
    if counter is None:
        return None
    n_ctx = counter.n_ctx
    reserve = reply_reserve(n_ctx, max_tokens)
    headroom = counter.recovery_headroom()
    draft_tokens = counter.text_tokens(draft) if draft else 0
    with_draft = draft.strip() or documents is not None
    asked: Message = {"role": "user", "content": draft}
    candidate = [*messages, asked] if with_draft else list(messages)
    if not candidate:
        return Meter(0, n_ctx, 0, reserve)
    doc_tokens = 0
    try:
        if documents is not None:
            candidate = documents(backend, candidate, max_tokens)
            doc_tokens = max(0, counter.text_tokens(str(candidate[-1]["content"])) - draft_tokens)
        fit = fit_messages(candidate, policy, counter, n_ctx=n_ctx, max_tokens=max_tokens, headroom=headroom)
    except MessageTooLongError as exc:
        return Meter(exc.tokens, n_ctx, draft_tokens, reserve, str(exc), doc_tokens)
    except (ContextOverflowError, ConfigError) as exc:  # full under stop, or a template that fails
        return Meter(_whole(counter, candidate, n_ctx), n_ctx, draft_tokens, reserve, str(exc), doc_tokens)
    return Meter(fit.prompt_tokens, n_ctx, draft_tokens, reserve, documents=doc_tokens)


def _whole(counter: TokenCounter, messages: Sequence[Message], n_ctx: int) -> int:
    chars = sum(len(str(m.get("content") or "")) for m in messages)
    if chars > n_ctx * MAX_CHARS_PER_TOKEN:  # too long to measure (see context_policy)
        return chars // MAX_CHARS_PER_TOKEN
    try:
        return counter.prompt_tokens(messages)
    except ConfigError:
        return 0
