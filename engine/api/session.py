"""The session: one conversation and its turns, for every front end.

The window's controller, `ember chat` and `ember serve` open their turns through a `ChatSession`
(the server's with `open_request_async`: the request is the prompt, `--record` records it) and
run them on the `Engine`, the model's one worker thread. The settings a turn and a conversation
carry, the reply format a conversation asks for, and the titler that names a new conversation
come with it. Names only: each lives in `engine.session` or `engine.runtime`.

The server's own answers over a turn (`stop` sequences, forced tool calls) take a stop-sequence
matcher, the system-message fold and the tool-call grammar from here too.
"""

from __future__ import annotations

from engine.backends.stops import StopMatcher
from engine.runtime import Engine
from engine.session.reply_format import SCHEMA_TEMPLATE, FormatKind, ReplyFormat, parse_schema_text
from engine.session.session import Ask, ChatSession, Plan, Turn, open_request_async
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
    "open_request_async",
    "parse_schema_text",
    "resolve",
]
