"""Conversations: the history store the front ends open (the sidebar's queries, `ember history`).

So far the store itself (the sidebar's queries and the recorder's writes are its methods), the
context meter a conversation shows, a failed turn's kind, and a reply format's schema.
"""

from __future__ import annotations

from engine.history.store import HistoryStore
from engine.turns.context_window import Meter, WithDocuments
from engine.turns.runner import error_kind
from engine.turns.structured import MAX_STRUCTURED_RETRIES, load_schema

__all__ = ["MAX_STRUCTURED_RETRIES", "HistoryStore", "Meter", "WithDocuments", "error_kind", "load_schema"]
