"""The window's side of the context policy (no Qt): which policy, the fit, the meter, the divider.

Everything that counts tokens runs on the engine's counting thread (`Engine.measure`), so
the event loop never waits for a tokenizer. A conversation without history keeps its policy
here; with history it lives in the conversation's settings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from desktop.core.context_choice import policy_for, with_policy
from engine.backends.base import Backend, Message
from engine.errors import ConfigError, ContextOverflowError
from engine.runtime import Engine
from engine.turns.context_policy import SETTINGS_KEY, ContextPolicy, Fit, unmeasured
from engine.turns.context_window import Meter, fit_for, measure_draft
from models.library.settings import ModelSettings


@runtime_checkable
class ContextView(Protocol):
    """A view that shows where the model's context begins (the window implements it)."""

    def show_context_cut(self, resume_turn: int | None) -> None: ...


class ContextKeeper:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.unsaved: ContextPolicy | None = None  # chosen for a conversation with no history

    def policy(self, conversation: Mapping[str, Any] | None, model: ModelSettings | None) -> ContextPolicy:
        if conversation is None:
            return self.unsaved or policy_for(None, model)
        return policy_for(conversation, model)

    def updated(self, conversation: Mapping[str, Any], policy: ContextPolicy) -> dict[str, Any]:
        return with_policy(conversation, policy)

    @staticmethod
    def stored(conversation: Mapping[str, Any]) -> bool:
        return SETTINGS_KEY in conversation

    async def check(self, messages: Sequence[Message], policy: ContextPolicy,
                    max_tokens: int) -> ContextOverflowError | None:
        """Why the newest message must not be stored or sent (None when it may be)."""
        def work(backend: Backend) -> ContextOverflowError | None:
            try:
                fit_for(backend, messages, policy, max_tokens)
            except ContextOverflowError as exc:
                return exc
            except ConfigError:  # a template that fails: the turn reports it
                return None
            return None

        return await self.engine.measure(work)

    async def fit(self, messages: Sequence[Message], policy: ContextPolicy, max_tokens: int) -> Fit:
        """What the model will see; raises the policy's `ContextOverflowError`s."""
        fit = await self.engine.measure(lambda backend: fit_for(backend, messages, policy, max_tokens))
        return fit if fit is not None else unmeasured(messages)

    async def meter(self, messages: Sequence[Message], draft: str, policy: ContextPolicy,
                    max_tokens: int) -> Meter | None:
        return await self.engine.measure(lambda backend: measure_draft(backend, messages, draft, policy, max_tokens))
