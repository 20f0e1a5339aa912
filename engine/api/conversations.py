"""Conversations: the history store the front ends open (the sidebar's queries, `ember history`).

So far the store itself (the sidebar's queries and the recorder's writes are its methods), the
context meter a conversation shows, a failed turn's kind, a reply format's schema, the
conversation's export and import (with the bounded reading of an imported file), and replaying
a recorded reply (`ember history reproduce`).
"""

from __future__ import annotations

from engine.history.conversation_lock import DEFAULT_WAIT_S
from engine.history.export import conversation_to_json, export_json, export_markdown, import_json, iso, message_to_json
from engine.history.images import DamagedImage
from engine.history.store import HistoryStore
from engine.session.reproduce import CannotReproduce, reproduce
from engine.turns.context_window import Meter, WithDocuments
from engine.turns.runner import error_kind
from engine.turns.structured import MAX_STRUCTURED_RETRIES, load_schema
from models.library.json_input import IMPORT_MAX_BYTES, JsonInputError, parse_json_input, read_json_input

__all__ = [
    "DEFAULT_WAIT_S",
    "IMPORT_MAX_BYTES",
    "MAX_STRUCTURED_RETRIES",
    "CannotReproduce",
    "DamagedImage",
    "HistoryStore",
    "JsonInputError",
    "Meter",
    "WithDocuments",
    "conversation_to_json",
    "error_kind",
    "export_json",
    "export_markdown",
    "import_json",
    "iso",
    "load_schema",
    "message_to_json",
    "parse_json_input",
    "read_json_input",
    "reproduce",
]
