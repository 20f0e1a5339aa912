"""Who may run a tool call: the user's answer, the conversation's "always allow" list, and
what a turn with tools is given (`ToolUse`); plus how a result is cut to fit the context."""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from engine.events import ToolCall
from engine.tools.registry import ToolSet

DEFAULT_MAX_ROUNDS = 8
DEFAULT_MAX_RESULT_CHARS = 16_000
DENIED_TEXT = "The user denied this tool call. Do not try it again; answer without it."
CUT_NOTE = "\n[result cut: {shown} of {total} characters shown, to fit the context]"


class Decision(enum.Enum):
    APPROVE = "approve"
    DENY = "deny"
    ALWAYS = "always"  # approve, and approve this tool from now on in this conversation


Approver = Callable[[ToolCall], Decision]


def permission_key(name: str, source: str = "builtin") -> str:
    """What "always allow" is keyed by: a built-in's name, else `SOURCE:NAME` (`mcp:files:read`).

    Keyed by source as well as name, so no other tool that comes to carry an allowed name (a
    server's tool when the built-in is off) inherits the user's choice.
    """
    return name if source == "builtin" else f"{source}:{name}"


class ToolPermissions:
    """The tools the user chose to always allow in one conversation (by `permission_key`); each can be revoked."""

    def __init__(self, always: Iterable[str] | None = None) -> None:
        self.always: set[str] = set(always or ())

    def allows(self, name: str, source: str = "builtin") -> bool:
        return permission_key(name, source) in self.always

    def allow_always(self, name: str, source: str = "builtin") -> None:
        self.always.add(permission_key(name, source))

    def revoke(self, key: str) -> None:
        """Forget one `permission_key` (as listed in `always`)."""
        self.always.discard(key)


def deny_all(_call: ToolCall) -> Decision:
    return Decision.DENY


@dataclass
class ToolUse:
    """What a turn with tools is given: the tools, who approves a call, what is always allowed."""

    tools: ToolSet
    approver: Approver = deny_all
    permissions: ToolPermissions = field(default_factory=ToolPermissions)
    max_rounds: int = DEFAULT_MAX_ROUNDS
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS


def cut_result(text: str, budget: int) -> str:
    """`text`, or its head plus a note when it is longer than `budget` characters."""
    if len(text) <= budget:
        return text
    note = CUT_NOTE.format(shown="{shown}", total=len(text))
    shown = max(0, budget - len(note) - 8)
    return text[:shown] + note.format(shown=shown)


def arguments_text(arguments: dict[str, Any]) -> str:
    """The arguments as the user sees them on an approval prompt: full, indented JSON."""
    return json.dumps(arguments, ensure_ascii=False, indent=2, sort_keys=True)
