"""`ember serve --record`: each API request becomes a conversation in Ember's history.

Off by default: what an editor or script sends is its own business. With `--record`, a
request's earlier user and assistant messages are stored as the conversation's past (its
system prompt in the conversation's settings), its last user message as the question, and
the turn's events through the same `TurnRecorder` as the window's and `ember chat`'s, so a
stopped or failed reply is recorded as such. Tool calls and results are not stored.
Everything runs on the server's event-loop thread (the store's connection belongs to it).
A history failure is logged and never fails the request.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from desktop.serve.wire import ChatCall
from engine.backends.base import Message
from engine.events import Event, ToolEvent
from engine.history.recorder import TurnRecorder
from engine.history.store import HistoryStore
from engine.history.types import HistoryError

log = logging.getLogger("desktop.serve.record")

Observer = Callable[[Event], None]
_ERRORS = (HistoryError, OSError)


class ApiHistory:
    """Records API requests into the history store that `open_store` opens (on first use)."""

    def __init__(self, open_store: Callable[[], HistoryStore]) -> None:
        self._open_store = open_store
        self._store: HistoryStore | None = None

    def begin(self, call: ChatCall, model: str) -> Observer | None:
        """Store the request's conversation and question; returns what records its events (None on failure)."""
        question = next((i for i in range(len(call.messages) - 1, -1, -1) if call.messages[i]["role"] == "user"), None)
        if question is None:
            return None
        try:
            store = self._store = self._store or self._open_store()
            recorder = _open_turn(store, call.messages[:question], str(call.messages[question]["content"]), model)
        except _ERRORS as exc:
            log.warning("could not record an API request in the history: %s", exc)
            return None
        return _observer(recorder)

    def close(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            store.close()


def _open_turn(store: HistoryStore, past: tuple[Message, ...], question: str, model: str) -> TurnRecorder:
    system = "\n\n".join(str(m["content"]) for m in past if m["role"] == "system")
    conversation = store.create_conversation(model=model, settings={"system": system} if system else {})
    parent: int | None = None
    for message in past:
        if message["role"] in ("user", "assistant") and str(message["content"]).strip():
            parent = store.add_message(conversation.id, message["role"], str(message["content"]), parent_id=parent)
    recorder = TurnRecorder(store, conversation.id, parent_id=parent, model=model)
    recorder.begin(question)
    return recorder


def _observer(recorder: TurnRecorder) -> Observer:
    def observe(event: Event) -> None:
        if isinstance(event, ToolEvent):
            return  # tool calls: the answer to an API client, not a chat message
        try:
            recorder.on_event(event)
        except _ERRORS as exc:
            log.warning("could not record an API reply in the history: %s", exc)

    return observe
