"""`ember serve --record`: each API request becomes a conversation in Ember's history.

Off by default: what an editor or script sends is its own business. With `--record`, the
request's turn is recorded by the session (`ChatSession.begin_request`): its earlier user and
assistant messages become the conversation's past (its system prompt the conversation's
setting), its last user message the question, and the turn's events go through the same
recorder as the window's and `ember chat`'s, so a stopped or failed reply is recorded as
such. Tool calls and results are not stored. A refused request (it does not fit) stores
nothing. Everything runs on the server's event-loop thread (the store's connection belongs
to it). A history failure is logged and never fails the request.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from engine.api.conversations import HistoryStore
from engine.api.session import ChatSession, Plan, Turn
from engine.api.values import Event, HistoryError, ToolEvent

log = logging.getLogger("desktop.serve.record")

_ERRORS = (HistoryError, OSError)


class ApiHistory:
    """Records API requests, through a session over the history store `open_store` opens (on first use)."""

    def __init__(self, open_store: Callable[[], HistoryStore]) -> None:
        self._open_store = open_store
        self._session: ChatSession | None = None

    def begin(self, plan: Plan, model: str) -> RecordedTurn | None:
        """Store the request's conversation and question; what records its events (None: not recorded)."""
        if not any(m["role"] == "user" for m in plan.request.messages):
            return None
        try:
            session = self._session = self._session or ChatSession(self._open_store())
            return RecordedTurn(session.begin_request(plan, model=model))
        except _ERRORS as exc:
            log.warning("could not record an API request in the history: %s", exc)
            return None

    def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            session.close()


class RecordedTurn:
    """One API turn being recorded: call it with each event, close it when the turn ends."""

    def __init__(self, turn: Turn) -> None:
        self._turn = turn

    def __call__(self, event: Event) -> None:
        if isinstance(event, ToolEvent):
            return  # tool calls: the answer to an API client, not a chat message
        self._quietly(lambda: self._turn.record(event))

    def close(self) -> None:
        """An unfinished reply is kept as interrupted; the conversation is given back."""
        self._quietly(self._turn.close)

    @staticmethod
    def _quietly(step: Callable[[], None]) -> None:
        try:
            step()
        except _ERRORS as exc:
            log.warning("could not record an API reply in the history: %s", exc)
