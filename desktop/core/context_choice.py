"""Which context policy a conversation uses, and the check before a message is stored (no Qt).

Shared by the window and `ember chat`. The policy comes from, in order: the command line
(`--context-policy`), the conversation's own settings (`settings["context_policy"]`), the
model's saved default (`ModelSettings.context_policy`), else truncate-middle.

A message is checked before it is stored, so nothing that cannot be sent ever enters the
history: a message that cannot fit even alone is refused under every policy, and under
`stop` so is one that would overflow the conversation (the user then chooses: another
policy, or a new conversation).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.backends.base import Backend, Message
from engine.errors import ConfigError, ContextOverflowError
from engine.history.recorder import prompt_messages
from engine.history.store import HistoryStore
from engine.turns.context_policy import DEFAULT_POLICY, SETTINGS_KEY, ContextPolicy, parse_policy
from engine.turns.context_window import fit_for
from models.library.settings import ModelSettings


def policy_for(conversation: Mapping[str, Any] | None, model: ModelSettings | None,
               override: str | None = None) -> ContextPolicy:
    """The policy in force: `override`, else the conversation's, else the model's default."""
    if override:
        return parse_policy(override)
    default = parse_policy(model.context_policy) if model is not None else DEFAULT_POLICY
    stored = (conversation or {}).get(SETTINGS_KEY)
    return parse_policy(stored, default) if stored is not None else default


def with_policy(settings: Mapping[str, Any], policy: ContextPolicy) -> dict[str, Any]:
    """Conversation `settings` with the policy replaced (other settings kept)."""
    return {**settings, SETTINGS_KEY: policy.value}


def preview_messages(store: HistoryStore | None, conversation_id: int | None, prompt: str,
                     system: str | None) -> list[Message]:
    """The messages a new `prompt` would be sent with, read before anything is stored."""
    if store is not None and conversation_id is not None:
        head = prompt_messages(store, conversation_id, system=system, join_roles=False)
    else:
        head = [{"role": "system", "content": system}] if system else []
    return [*head, {"role": "user", "content": prompt}]


def refusal(backend: Backend, messages: Sequence[Message], policy: ContextPolicy, max_tokens: int) -> str:
    """Why the newest message must not be stored or sent ("" when it may be)."""
    try:
        fit_for(backend, messages, policy, max_tokens)
    except (ContextOverflowError, ConfigError) as exc:
        return str(exc)
    return ""
