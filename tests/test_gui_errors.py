"""Recovery and errors: no scaffolding on screen, the malformed banner, Try again, load failures."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gui_helpers import WAIT_MS, Chat, widget_texts
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from desktop.core.model_choice import choose_model
from desktop.qt.chat.message_view import AssistantMessage, TurnBanner
from engine.backends.base import PlainBackend, Request, StreamInfo
from engine.backends.scripted import ScriptedBackend
from engine.cancel import CancelToken
from engine.errors import BackendError, ContextOverflowError, LLMError
from engine.events import Piece
from engine.session.messages import branch_messages
from tests.reply_text import registry_markers

pytest_plugins = ["gui_helpers"]

MakeChat = Callable[..., Chat]

MALFORMED = "The model returned a malformed reply — please try again."


def scaffolding_only(delay_ms: int = 0) -> list[Any]:
    return [
        {"text": "<|tool_call_start|>", "special": True, "delay_ms": delay_ms},
        '[get_weather(location="Paris")]',
        {"text": "<|tool_call_end|>", "special": True},
    ]


def banners(chat: Chat) -> list[TurnBanner]:
    return [w for w in chat.window.conversation.messages() if isinstance(w, TurnBanner)]


def test_scaffolding_then_recovery_leaves_no_marker_anywhere(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat(scaffolding_only(), [{"text": "It is sunny in Paris.", "delay_ms": 150}])
    chat.type_and_send("weather in Paris?")
    qtbot.waitUntil(
        lambda: chat.window.last_reply() is not None and chat.reply().status.text() == "Retrying…", timeout=WAIT_MS
    )
    reply = chat.wait_reply_finished()
    assert reply.answer_text() == "It is sunny in Paris."
    assert reply.status.text() == ""  # the quiet indicator is gone once the reply is in
    shown = "\n".join(widget_texts(chat.window))
    for marker in [*registry_markers(), "<|", "|>", "get_weather"]:
        assert marker not in shown, marker


def test_terminal_malformed_reply_shows_the_banner_and_the_app_still_sends(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat(scaffolding_only(), scaffolding_only(), "Hello again.")
    chat.type_and_send("hi")
    qtbot.waitUntil(lambda: bool(banners(chat)), timeout=WAIT_MS)
    chat.wait_idle()
    banner = banners(chat)[0]
    assert banner.message.text() == MALFORMED
    assert banner.button is not None and banner.button.text() == "Try again"
    # The banner sits right under the user's message; the empty reply is gone.
    assert chat.window.conversation.messages()[-1] is banner
    assert not any(isinstance(w, AssistantMessage) for w in chat.window.conversation.messages())
    assert "<|" not in "\n".join(widget_texts(chat.window))
    chat.type_and_send("are you there?")
    qtbot.waitUntil(lambda: chat.window.last_reply() is not None and chat.reply().finished, timeout=WAIT_MS)
    assert chat.reply().answer_text() == "Hello again."
    assert not banner.button.isEnabled()  # Try again only ever reruns the latest turn


def test_try_again_reruns_the_turn(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat(scaffolding_only(), scaffolding_only(), "Second time lucky.")
    chat.type_and_send("hi")
    qtbot.waitUntil(lambda: bool(banners(chat)), timeout=WAIT_MS)
    chat.wait_idle()
    button = banners(chat)[0].button
    assert button is not None
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: chat.window.last_reply() is not None and chat.reply().finished, timeout=WAIT_MS)
    assert chat.reply().answer_text() == "Second time lucky."
    assert banners(chat) == []
    assert branch_messages(chat.controller.session.path()) == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Second time lucky."},
    ]
    assert isinstance(chat.backend, ScriptedBackend) and len(chat.backend.requests) == 3


class FailingBackend(PlainBackend):
    """Raises `errors` in order, one per request, then streams `text`."""

    def __init__(self, errors: list[LLMError], text: str = "Back to normal.") -> None:
        self.name = "failing"
        self._errors = list(errors)
        self._text = text

    def stream(self, request: Request, cancel: CancelToken, info: StreamInfo) -> Iterator[Piece]:
        if self._errors:
            raise self._errors.pop(0)
        yield Piece(self._text)

    def close(self) -> None:
        pass


def test_a_full_context_gets_its_own_message(make_chat: MakeChat, qtbot: QtBot) -> None:
    overflow = ContextOverflowError("the prompt needs 5000 tokens, the context holds 4096")
    chat = make_chat(backend=FailingBackend([overflow]))
    chat.type_and_send("a very long message")
    qtbot.waitUntil(lambda: bool(banners(chat)), timeout=WAIT_MS)
    banner = banners(chat)[0]
    assert "context window" in banner.message.text()
    assert banner.button is not None and banner.button.text() == "New conversation"
    chat.wait_idle()
    qtbot.mouseClick(banner.button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not chat.window.conversation.messages(), timeout=WAIT_MS)
    chat.type_and_send("short")
    chat.wait_reply_finished()
    assert chat.reply().answer_text() == "Back to normal."


def test_a_backend_failure_gets_its_own_message_and_try_again(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat(backend=FailingBackend([BackendError("llama_decode returned -3")]))
    chat.type_and_send("hi")
    qtbot.waitUntil(lambda: bool(banners(chat)), timeout=WAIT_MS)
    banner = banners(chat)[0]
    assert banner.message.text() == "The model stopped with an error: llama_decode returned -3"
    chat.wait_idle()
    assert banner.button is not None
    qtbot.mouseClick(banner.button, Qt.MouseButton.LeftButton)
    chat.wait_reply_finished()
    assert chat.reply().answer_text() == "Back to normal."


def test_a_load_failures_sentence_follows_its_cause_not_the_files_name(
    make_chat: MakeChat, qtbot: QtBot, tmp_path: Path
) -> None:
    # The engine's error carries its kind: a missing file named like another failure reads as missing
    # (the window used to match its own patterns against the whole message, the name included).
    chat = make_chat(no_model=True)
    load = asyncio.ensure_future(chat.controller.models.load(choose_model(str(tmp_path / "truncated.gguf"), None)))
    qtbot.waitUntil(load.done, timeout=WAIT_MS)
    assert chat.window.notice.text() == (
        "Couldn't load truncated.gguf. The file is no longer where it was. No model is loaded yet — choose another one."
    )


def test_a_model_load_failure_is_readable_and_the_app_stays_usable(
    make_chat: MakeChat, qtbot: QtBot, tmp_path: Path
) -> None:
    chat = make_chat(no_model=True)
    choice = choose_model(str(tmp_path / "missing.gguf"), None)
    load = asyncio.ensure_future(chat.controller.models.load(choice))
    qtbot.waitUntil(load.done, timeout=WAIT_MS)
    assert load.result() is False
    notice = chat.window.notice
    assert notice.isVisible()
    assert "missing.gguf" in notice.text() and "no longer where it was" in notice.text()
    assert "does not exist" in notice.details.text() and notice.details_button.isVisibleTo(notice)
    assert chat.window.status.model.text() == "No model"
    chat.type_and_send("hello?")
    qtbot.waitUntil(lambda: bool(banners(chat)), timeout=WAIT_MS)
    assert banners(chat)[0].message.text().startswith("No model is loaded")
    assert chat.window.composer.edit.isEnabled()
