"""The model the controller's engine holds: loading one, what is loaded, why the last load failed.

A message typed while the first model loads waits here, under "Waiting for the model to
load… 60 %" (`LoadWaitSink`; llama.cpp's figure, the share of the weights read), until the
model is ready or Stop ends the wait at once; it then runs with the loaded model's own
settings (`settle`), not the defaults known when it was typed.
"""

from __future__ import annotations

import asyncio
import logging

from desktop.core.chat_views import ChatView, LoadWaitSink, ReplySink
from desktop.core.model_choice import ModelChoice, ModelInfo, describe_backend, remember_model
from engine.api.errors import EngineError, LoadFailure
from engine.api.session import ChatSession, Engine, Turn, TurnSettings, resolve
from engine.api.values import FinishReason, TurnStats

log = logging.getLogger("desktop.controller")


class ModelSlot:
    """Loads a `ModelChoice` on the engine's worker and shows how it went; a failure is shown, never raised."""

    def __init__(self, engine: Engine, view: ChatView) -> None:
        self.engine = engine
        self.view = view
        self.choice: ModelChoice | None = None
        self.model: ModelInfo | None = describe_backend(engine.backend) if engine.backend else None
        self.load_error = ""
        self._loading: asyncio.Task[bool] | None = None
        self._loading_label = ""
        self._percent: int | None = None  # how far the weights' load has got
        self._stopped = asyncio.Event()  # set by Stop: ends a wait for the model at once
        self._waiting: ReplySink | None = None  # the reply shown while a message waited for the model

    async def load(self, choice: ModelChoice) -> bool:
        self._loading = asyncio.ensure_future(self._load(choice))
        return await self._loading

    async def _load(self, choice: ModelChoice) -> bool:
        self._loading_label = choice.label
        self._percent = None
        self.view.model_loading(choice.label)
        try:
            backend = await self.engine.load(choice.factory, self._progress)
        except (EngineError, OSError) as exc:
            self.load_error = str(exc)
            log.warning("model load failed: %s", exc)
            self.view.model_failed(choice.label, str(exc), LoadFailure.of(exc))
            return False
        self.model = describe_backend(backend, choice.label)
        self.choice = choice
        self.load_error = ""
        remember_model(choice)
        self.view.model_ready(self.model)
        return True

    def _progress(self, percent: int) -> None:
        if self._loading is None or self._loading.done():
            return  # a late report, after the load ended
        self._percent = percent
        self.view.model_load_progress(self._loading_label, percent)
        if isinstance(self._waiting, LoadWaitSink) and self.engine.backend is None:
            self._waiting.waiting_for_model(self._loading_label, percent)

    def first_pending(self) -> bool:
        """No model yet and one loading: a message typed now waits for it (with a model, it answers)."""
        return self._loading is not None and not self._loading.done() and self.engine.backend is None

    async def wait_for_first(self) -> None:
        """With no model yet, a message typed while one loads waits for it, its reply saying so.

        With one loaded, the current model answers while the next one loads. `stop_waiting`
        ends the wait at once (the load goes on); the waiting reply then ends as stopped.
        """
        self._waiting = None  # a previous turn's, if it failed before its reply began
        if not self.first_pending() or self._loading is None:
            return
        self._stopped.clear()
        sink = self._waiting = self.view.start_reply()
        if isinstance(sink, LoadWaitSink):
            sink.waiting_for_model(self._loading_label, self._percent)
        stopped = asyncio.ensure_future(self._stopped.wait())
        await asyncio.wait([self._loading, stopped], return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        if self._stopped.is_set():
            self._waiting = None
            sink.finish(TurnStats(finish_reason=FinishReason.CANCELLED))  # stopped before the model came: no answer
        elif self.engine.backend is None:
            self._waiting = None  # the load failed: the failure banner takes the reply's place
        elif isinstance(sink, LoadWaitSink):
            sink.model_arrived()

    def stop_waiting(self) -> None:
        self._stopped.set()

    def take_waiting(self) -> ReplySink | None:
        """The reply a message showed while it waited for the model (the turn goes on in it), once."""
        sink, self._waiting = self._waiting, None
        return sink

    async def settle(self, turn: Turn, session: ChatSession) -> None:
        """The model's own settings for `turn`, now that it is here (a turn typed during the load had none)."""
        system = await session.io(lambda: session.settings.system)
        turn.adopt(self.turn_settings(), system)

    @property
    def name(self) -> str:
        return self.model.label if self.model is not None else ""

    def turn_settings(self) -> TurnSettings:
        return resolve(self.choice.settings if self.choice is not None else None)
