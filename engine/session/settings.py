"""Settings: a model's saved settings + overrides → a turn's settings (one resolver for every front end),
and a conversation's own settings (`ConversationSettings`, typed).

The GUI passes the loaded model's saved settings (its dialog edits them); `ember chat` the
same saved settings plus its flags (the saved settings over the defaults that follow the
model: `engine.api.models.model_settings`). One set of defaults: `models.library.settings.ModelSettings`'s,
which `engine.backends.base.Sampling` also takes. Qt-free; not in `models/`, as it builds `Sampling`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from engine.backends.base import Sampling
from engine.errors import ConfigError
from engine.session.reply_format import SETTINGS_KEY as REPLY_FORMAT_KEY
from engine.session.reply_format import ReplyFormat
from engine.turns.context_policy import DEFAULT_POLICY, ContextPolicy, parse_policy
from engine.turns.context_policy import SETTINGS_KEY as POLICY_KEY
from models.library.settings import ModelSettings


@dataclass(frozen=True, slots=True)
class Overrides:
    """Values given for this run (command-line flags); None keeps the saved value."""

    temperature: float | None = None
    seed: int | None = None
    max_tokens: int | None = None
    context_length: int | None = None
    gpu_layers: int | None = None
    threads: int | None = None
    system_prompt: str | None = None
    kv_cache: str | None = None


@dataclass(frozen=True, slots=True)
class TurnSettings:
    """What a model loads with and what each turn sends."""

    model: ModelSettings  # the effective settings: saved ones with the overrides applied
    sampling: Sampling
    max_tokens: int

    @property
    def system_prompt(self) -> str:
        return self.model.system_prompt

    @property
    def context_policy(self) -> ContextPolicy:
        """The model's default policy (a conversation may choose its own)."""
        return parse_policy(self.model.context_policy)


def resolve(saved: ModelSettings | None = None, overrides: Overrides | None = None) -> TurnSettings:
    """The settings of a run; ConfigError (one line) for an override out of range."""
    given = {k: v for k, v in dataclasses.asdict(overrides or Overrides()).items() if v is not None}
    try:
        s = dataclasses.replace(saved or ModelSettings(), **given)
    except ValueError as exc:
        raise ConfigError(str(exc).replace("invalid model setting ", "invalid value for ")) from exc
    sampling = Sampling(
        temperature=s.temperature,
        top_p=s.top_p,
        top_k=s.top_k,
        min_p=s.min_p,
        repeat_penalty=s.repeat_penalty,
        seed=s.seed,
    )
    return TurnSettings(s, sampling, s.reply_limit)


@dataclass(frozen=True, slots=True)
class ConversationSettings:
    """One conversation's own settings, typed; stored as a JSON object with the conversation.

    `from_stored` is tolerant (a stored value is never trusted: anything unusable reads as
    unset) and keeps keys it does not know, so `to_stored` loses nothing a newer Ember wrote.
    """

    system: str = ""  # the conversation's own system prompt ("" : the model's)
    context_policy: ContextPolicy | None = None  # None: the model's default
    reply_format: ReplyFormat = field(default_factory=ReplyFormat)
    tools_enabled: bool = False
    tools_folders: tuple[str, ...] = ()
    tools_mcp: tuple[str, ...] = ()
    tools_always: tuple[str, ...] = ()  # tools the user chose to always allow here
    docs: str | None = None  # the collection its questions are answered from
    attachments: tuple[str, ...] = ()  # the files attached to it (absolute paths), answered from too
    extra: Mapping[str, Any] = field(default_factory=dict[str, Any])

    @classmethod
    def from_stored(cls, stored: Mapping[str, Any]) -> ConversationSettings:
        system = stored.get(_SYSTEM)
        policy = stored.get(_POLICY)
        docs = stored.get(_DOCS)
        return cls(
            system=system if isinstance(system, str) else "",
            context_policy=parse_policy(policy, DEFAULT_POLICY) if isinstance(policy, str) and policy else None,
            reply_format=ReplyFormat.from_settings(stored),
            tools_enabled=stored.get(_ENABLED) is True,
            tools_folders=_names(stored.get(_FOLDERS)),
            tools_mcp=_names(stored.get(_MCP)),
            tools_always=_names(stored.get(_ALWAYS)),
            docs=docs if isinstance(docs, str) and docs else None,
            attachments=tuple(p for p in _names(stored.get(_ATTACHMENTS)) if p),
            extra={k: v for k, v in stored.items() if k not in _KEYS},
        )

    def to_stored(self) -> dict[str, Any]:
        out = dict(self.extra)
        if self.system:
            out[_SYSTEM] = self.system
        if self.context_policy is not None:
            out[_POLICY] = self.context_policy.value
        fmt = self.reply_format.to_settings()
        if fmt is not None:
            out[REPLY_FORMAT_KEY] = fmt
        if self.tools_enabled:
            out[_ENABLED] = True
        if self.docs:
            out[_DOCS] = self.docs
        for key, names in (
            (_FOLDERS, self.tools_folders),
            (_MCP, self.tools_mcp),
            (_ALWAYS, self.tools_always),
            (_ATTACHMENTS, self.attachments),
        ):
            if names:
                out[key] = list(names)
        return out

    def with_(self, **changes: Any) -> ConversationSettings:
        return dataclasses.replace(self, **changes)


_SYSTEM, _POLICY = "system", POLICY_KEY
_ENABLED, _FOLDERS, _MCP, _ALWAYS = "tools_enabled", "tools_folders", "tools_mcp", "tools_always"
_DOCS, _ATTACHMENTS = "docs", "attachments"  # the keys `ember chat --docs/--attach` stored before they were typed
_KEYS = frozenset({_SYSTEM, _POLICY, REPLY_FORMAT_KEY, _ENABLED, _FOLDERS, _MCP, _ALWAYS, _DOCS, _ATTACHMENTS})


def _names(value: Any) -> tuple[str, ...]:
    """A stored list of names; anything else reads as none."""
    if not isinstance(value, list):
        return ()
    return tuple(str(v) for v in cast(list[Any], value) if isinstance(v, str | int))
