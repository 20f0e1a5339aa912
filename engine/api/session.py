"""The session: one conversation and its turns, for every front end.

The window's controller, `ember chat` and `ember serve --record` open a `ChatSession`, ask it for a
`Turn` (or the server its `Plan`) and run it on the `Engine`, the model's one worker thread. The
settings a turn and a conversation carry, the reply format a conversation asks for, and the titler
that names a new conversation come with it. Names only: each lives in `engine.session` or
`engine.runtime`.

`ember serve` still puts some turns together itself (its raw completions, forced tool calls and
`response_format` schemas): for those it takes a stop-sequence matcher, the system-message fold,
the tool-call grammar and a JSON schema compiled to a grammar from here too, the only turn
internals a front end touches, until the server runs every turn through the session.
"""

from __future__ import annotations

from engine.backends.stops import StopMatcher
from engine.runtime import Engine
from engine.session.reply_format import SCHEMA_TEMPLATE, FormatKind, ReplyFormat, parse_schema_text
from engine.session.session import Ask, ChatSession, Plan, Turn
from engine.session.settings import ConversationSettings, Overrides, TurnSettings, resolve
from engine.session.titling import ConversationTitler
from engine.turns.rounds import fold_system
from engine.turns.structured import compile_schema
from engine.turns.tool_grammar import call_grammar

__all__ = [
    "SCHEMA_TEMPLATE",
    "Ask",
    "ChatSession",
    "ConversationSettings",
    "ConversationTitler",
    "Engine",
    "FormatKind",
    "Overrides",
    "Plan",
    "ReplyFormat",
    "StopMatcher",
    "Turn",
    "TurnSettings",
    "call_grammar",
    "compile_schema",
    "fold_system",
    "parse_schema_text",
    "resolve",
]
