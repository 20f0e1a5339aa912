"""Conversations: the history store the front ends open (the sidebar's queries, `ember history`).

So far the store itself; the sidebar's queries and the recorder's writes are its methods.
"""

from __future__ import annotations

from engine.history.store import HistoryStore

__all__ = ["HistoryStore"]
