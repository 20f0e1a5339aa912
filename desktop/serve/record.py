"""`ember serve --record`: each API request becomes a conversation in Ember's history.

Off by default: what an editor or script sends is its own business. With `--record`, the
request's turn is recorded by the session (`open_request_async`, `ChatSession.begin_request`):
its earlier user and assistant messages become the conversation's past (its system prompt the
conversation's setting), its last user message the question, and the turn's events go through
the same recorder as the window's and `ember chat`'s, so a stopped or failed reply is recorded
as such. Tool calls and results are not stored. A refused request (it does not fit) stores
nothing. Everything runs on the server's event-loop thread (the store's connection belongs
to it). A history failure is logged and never fails the request.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from engine.api.conversations import HistoryStore
from engine.api.session import ChatSession
from engine.api.values import HistoryError

log = logging.getLogger("desktop.serve.record")


class ApiHistory:
    """The session API requests are recorded through, over the history store `open_store` opens (on first use)."""

    def __init__(self, open_store: Callable[[], HistoryStore]) -> None:
        self._open_store = open_store
        self._session: ChatSession | None = None

    def session(self) -> ChatSession | None:
        """The recording session; None (logged) when the history cannot be opened."""
        try:
            self._session = self._session or ChatSession(self._open_store())
        except (HistoryError, OSError) as exc:
            log.warning("could not record an API request in the history: %s", exc)
        return self._session

    def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            session.close()
