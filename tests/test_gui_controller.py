"""The window's controller without Qt: turns, loading, stop, failures (a fake view records)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

from desktop.core.controller import ChatController
from desktop.core.failures import FailureAction, TurnFailure, failure_for
from desktop.core.model_choice import ModelChoice, ModelInfo
from engine.api.errors import LoadFailure
from engine.api.factory import BackendSpec
from engine.backends.base import Backend, Message
from engine.backends.scripted import ScriptedBackend
from engine.events import TurnStats
from engine.llama import load_progress
from engine.runtime import Engine
from engine.session.messages import branch_messages
from models.library.settings import ModelSettings


class FakeReply:
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def add_thinking(self, text: str) -> None:
        self.events.append(("thinking", text))

    def add_content(self, text: str) -> None:
        self.events.append(("content", text))

    def restart(self, reason: str) -> None:
        self.events.append(("restart", reason))

    def retrying(self, attempt: int, error: str) -> None:
        self.events.append(("retrying", attempt))

    def note(self, text: str) -> None:
        self.events.append(("note", text))

    def progress(self, done: int, total: int) -> None:
        self.events.append(("progress", (done, total)))

    def finish(self, stats: TurnStats) -> None:
        self.events.append(("finish", stats.finish_reason))

    def waiting_for_model(self, label: str, percent: int | None = None) -> None:
        self.events.append(("waiting", label if percent is None else f"{label} {percent} %"))

    def model_arrived(self) -> None:
        self.events.append(("arrived", None))


class FakeView:
    """Implements ChatView by recording what it was asked to show."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.replies: list[FakeReply] = []

    def _record(self, name: str, arg: Any = None) -> None:
        self.calls.append((name, arg))

    def show_user_message(self, text: str) -> None:
        self._record("show_user_message", text)

    def start_reply(self) -> FakeReply:
        self.replies.append(FakeReply())
        self._record("start_reply")
        return self.replies[-1]

    def show_turn_failure(self, failure: TurnFailure) -> None:
        self._record("show_turn_failure", failure)

    def clear_turn_failure(self, *, remove: bool) -> None:
        self._record("clear_turn_failure", remove)

    def set_busy(self, busy: bool) -> None:
        self._record("set_busy", busy)

    def show_stats(self, stats: TurnStats) -> None:
        self._record("show_stats", stats)

    def clear_conversation(self) -> None:
        self._record("clear_conversation")

    def model_loading(self, label: str) -> None:
        self._record("model_loading", label)

    def model_load_progress(self, label: str, percent: int) -> None:
        self._record("model_load_progress", (label, percent))

    def model_ready(self, info: ModelInfo) -> None:
        self._record("model_ready", info)

    def model_failed(self, label: str, message: str, cause: LoadFailure) -> None:
        self._record("model_failed", message)

    def named(self, name: str) -> list[Any]:
        return [arg for call, arg in self.calls if call == name]


class GatedChoice(ModelChoice):
    """A model whose loading waits until the test opens the gate."""

    gate = threading.Event()
    backend: Backend = ScriptedBackend.from_texts("loaded answer")

    def factory(self) -> Backend:
        assert self.gate.wait(5)
        return self.backend


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def until(condition: Callable[[], object], timeout_s: float = 5.0) -> None:
    """Yields to the loop until `condition()` holds (no fixed sleep: a loaded machine only waits longer)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the condition did not hold in time"
        await asyncio.sleep(0.005)


def test_a_turn_streams_into_the_view_and_the_conversation() -> None:
    async def main() -> tuple[FakeView, list[Message]]:
        view = FakeView()
        controller = ChatController(Engine(ScriptedBackend.from_texts(["<think>", "hm", "</think>", "Hi!"])), view)
        assert await controller.send("hello")
        thread = branch_messages(controller.session.path())
        await controller.aclose()
        return view, thread

    view, thread = run(main())
    assert view.replies[0].events == [("thinking", "hm"), ("content", "Hi!"), ("finish", "stop")]
    assert view.named("set_busy") == [True, False]
    assert thread == [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "Hi!"}]


def test_a_message_sent_while_loading_waits_for_the_model() -> None:
    async def main() -> FakeView:
        view = FakeView()
        controller = ChatController(Engine(), view)
        choice = GatedChoice(BackendSpec("script", "x"), label="gated")
        load = asyncio.ensure_future(controller.models.load(choice))
        send = asyncio.ensure_future(controller.send("hi"))
        await until(lambda: view.replies and view.replies[0].events)
        assert view.replies[0].events == [("waiting", "gated")]  # shown waiting, nothing run yet
        GatedChoice.gate.set()
        assert await load and await send
        await controller.aclose()
        return view

    GatedChoice.gate.clear()
    GatedChoice.backend = ScriptedBackend.from_texts("loaded answer")
    view = run(main())
    assert view.named("model_loading") == ["gated"]
    assert isinstance(view.named("model_ready")[0], ModelInfo)
    assert view.replies[0].events == [
        ("waiting", "gated"),
        ("arrived", None),
        ("content", "loaded answer"),
        ("finish", "stop"),
    ]


def test_stop_while_the_model_loads_ends_the_wait_at_once() -> None:
    async def main() -> tuple[FakeView, bool]:
        view = FakeView()
        controller = ChatController(Engine(), view)
        load = asyncio.ensure_future(controller.models.load(GatedChoice(BackendSpec("script", "x"), label="g")))
        send = asyncio.ensure_future(controller.send("hi"))
        await until(lambda: view.replies and view.replies[0].events)  # the turn waits for the model
        controller.stop()
        await asyncio.wait_for(send, 5)  # the model is still loading: Stop does not wait for it
        still_loading = not load.done()
        GatedChoice.gate.set()
        await load
        assert not controller.busy
        await controller.aclose()
        return view, still_loading

    GatedChoice.gate.clear()
    GatedChoice.backend = ScriptedBackend.from_texts("never shown")
    view, still_loading = run(main())
    assert still_loading
    assert view.replies[0].events == [("waiting", "g"), ("finish", "cancelled")]
    assert view.named("set_busy") == [True, False]


def test_a_message_sent_during_a_slow_load_runs_with_the_models_own_settings() -> None:
    """The first-message race: the turn takes the loaded model's settings, not the defaults of the typing moment."""
    safe = ModelSettings(repeat_penalty=1.15, max_tokens=1024, temperature=0.2, system_prompt="Be brief.")
    backend = ScriptedBackend.from_texts("loaded answer")

    async def main() -> FakeView:
        view = FakeView()
        controller = ChatController(Engine(), view)
        choice = GatedChoice(BackendSpec("script", "x"), label="slow", settings=safe)
        load = asyncio.ensure_future(controller.models.load(choice))
        send = asyncio.ensure_future(controller.send("hi"))
        await until(lambda: view.replies and view.replies[0].events)  # typed and stored before the model is there
        assert view.replies and view.replies[0].events == [("waiting", "slow")]
        GatedChoice.gate.set()
        assert await load and await send
        await controller.aclose()
        return view

    GatedChoice.gate.clear()
    GatedChoice.backend = backend
    view = run(main())
    used = backend.requests[0]
    assert used.sampling.repeat_penalty == 1.15 and used.sampling.temperature == 0.2
    assert used.max_tokens == 1024
    assert used.messages[0]["role"] == "system" and used.messages[0]["content"].startswith("Be brief.")
    assert view.replies[0].events == [
        ("waiting", "slow"),
        ("arrived", None),
        ("content", "loaded answer"),
        ("finish", "stop"),
    ]


class ReportingChoice(ModelChoice):
    """A model whose load reports 30 %, waits for the test, then reports 60 % and 100 %."""

    gate = threading.Event()
    reported = threading.Event()

    def factory(self) -> Backend:
        report = load_progress.current()
        assert report is not None  # Engine.load hands the load a reporter
        report(0.3)
        report(0.301)  # the same whole percent: not passed on again
        self.reported.set()
        assert self.gate.wait(5)
        report(0.6)
        report(1.0)
        return ScriptedBackend.from_texts("loaded answer")


def test_the_waiting_reply_and_the_status_show_how_far_the_load_has_got() -> None:
    async def main() -> FakeView:
        view = FakeView()
        controller = ChatController(Engine(), view)
        load = asyncio.ensure_future(controller.models.load(ReportingChoice(BackendSpec("script", "x"), label="slow")))
        assert await asyncio.to_thread(ReportingChoice.reported.wait, 5)
        await until(lambda: view.named("model_load_progress"))  # the report crosses to the loop
        send = asyncio.ensure_future(controller.send("hi"))  # typed after 30 %: it shows 30 % at once
        await until(lambda: view.replies and view.replies[0].events)
        ReportingChoice.gate.set()
        assert await load and await send
        await controller.aclose()
        return view

    ReportingChoice.gate.clear()
    ReportingChoice.reported.clear()
    view = run(main())
    assert view.named("model_load_progress") == [("slow", 30), ("slow", 60), ("slow", 100)]
    waits = [e for e in view.replies[0].events if e[0] == "waiting"]
    assert waits == [("waiting", "slow 30 %"), ("waiting", "slow 60 %"), ("waiting", "slow 100 %")]
    assert view.replies[0].events[-2:] == [("content", "loaded answer"), ("finish", "stop")]


def test_failure_copy() -> None:
    assert failure_for("malformed_reply", "x") == TurnFailure(
        "malformed_reply", "The model returned a malformed reply — please try again.", FailureAction.RETRY
    )
    assert failure_for("context_full", "x").action is FailureAction.NEW_CONVERSATION
    assert failure_for("script", "no reply left").action is None
    assert failure_for("no_model", "").text == "No model is loaded."
    assert failure_for("backend", "boom").text == "The model stopped with an error: boom"
