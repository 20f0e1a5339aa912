"""Naming a conversation after its first exchange, in the background.

On a backend with the grammar capability the model writes the title (a structured turn
from `engine.turns.titles.title_request`, run by the engine like any other turn); otherwise the title the store gave the
conversation at its first message (`title_from_text`) stays. A user's own title is never
replaced (the store checks).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from engine.cancel import CancelToken
from engine.errors import EngineError
from engine.history.types import HistoryError
from engine.runtime import Engine
from engine.session.session import ChatSession
from engine.turns.titles import title_from, title_request

log = logging.getLogger("engine.session")


class ConversationTitler:
    """Titles the open conversation once its first reply is in; `on_titled` runs after each title."""

    def __init__(self, engine: Engine, session: ChatSession, on_titled: Callable[[], None]) -> None:
        self.engine = engine
        self.session = session
        self._on_titled = on_titled
        self._task: asyncio.Task[None] | None = None
        self._cancel = CancelToken()

    def after_reply(self) -> None:
        """Call after a completed reply: titles the conversation if that was its first exchange."""
        backend = self.engine.backend
        # Without a grammar the title request is a plain reply: not worth a model call (and a
        # scripted backend would spend a scripted reply on it); the store's title stays.
        if backend is None or not backend.capabilities.grammar:
            return
        self._task = asyncio.ensure_future(self._title_first_exchange())

    def step_aside(self) -> None:
        """A user's turn is about to run: stop a title in progress at once (the store's title from
        the first words stays); later conversations are still titled."""
        if self._task is not None and not self._task.done():
            self._cancel.cancel()
            self._cancel = CancelToken()

    async def aclose(self) -> None:
        """Stop a title in progress and wait for it (before the engine shuts down)."""
        self._cancel.cancel()
        if self._task is not None:
            await asyncio.wait([self._task])

    async def _title_first_exchange(self) -> None:
        try:
            exchange = await self.session.io(self.session.first_exchange)
        except HistoryError:
            return
        if exchange is not None:
            await self._title(*exchange)

    async def _title(self, conversation_id: int, question: str, answer: str) -> None:
        try:  # a turn like any other: the engine is busy while it runs
            events = [e async for e in self.engine.run_turn(title_request(question, answer), self._cancel)]
            title = title_from(events, question, answer)
            await self.session.io(lambda: self.session.store.set_auto_title(conversation_id, title))
        except (HistoryError, EngineError, RuntimeError) as exc:  # RuntimeError: the engine shut down meanwhile
            log.warning("no title saved: %s", exc)
            return
        self._on_titled()
