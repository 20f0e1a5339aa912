"""The approval card in the window: arguments fully visible, keyboard approval, the per-conversation toggle."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from gui_helpers import WAIT_MS, Chat, shown_text
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QWidget
from pytestqt.qtbot import QtBot

from desktop.qt.chat.message_view import AssistantMessage
from desktop.qt.chat.tool_card import ToolCallCard, ToolCardArea
from desktop.qt.window import WindowOptions
from engine.backends.scripted import ScriptedBackend
from engine.events import ToolCall
from engine.history.store import HistoryStore
from engine.tools.permissions import Decision
from models.library.paths import ember_paths

pytest_plugins = ["gui_helpers"]

LONG = "x" * 3000 + " END-OF-ARGUMENT"
CALC = '<tool_call>{"name": "calculator", "arguments": {"expression": "6 * 7"}}</tool_call>'


def calc_call(expression: str) -> str:
    return json.dumps({"name": "calculator", "arguments": {"expression": expression}})


def tool_chat(make_chat: Callable[..., Chat], *replies: str) -> tuple[Chat, ToolCardArea]:
    chat = make_chat(*replies)
    chat.window.tool_toggle.setChecked(True)
    return chat, chat.window.tool_cards


def scripted(chat: Chat) -> ScriptedBackend:
    """The chat's backend, which these tests build as a scripted one (its requests are recorded)."""
    assert isinstance(chat.backend, ScriptedBackend)
    return chat.backend


def wait_card(chat: Chat, area: ToolCardArea, index: int = 0) -> ToolCallCard:
    chat.qtbot.waitUntil(lambda: len(area.cards) > index and list(area.cards.values())[index].asking, timeout=WAIT_MS)
    return list(area.cards.values())[index]


def test_card_shows_the_name_and_the_full_arguments(qtbot: QtBot) -> None:
    card = ToolCallCard(ToolCall("c1", "read_file", {"path": "notes.txt", "note": LONG}))
    qtbot.addWidget(card)
    assert "read_file" in card.title.text()
    shown = json.loads(card.arguments.toPlainText())
    assert shown == {"path": "notes.txt", "note": LONG}  # nothing cut, however long
    assert card.arguments.isReadOnly()


@pytest.mark.parametrize(
    ("key", "decision"),
    [
        (Qt.Key.Key_Return, Decision.APPROVE),
        (Qt.Key.Key_Y, Decision.APPROVE),
        (Qt.Key.Key_N, Decision.DENY),
        (Qt.Key.Key_A, Decision.ALWAYS),
    ],
)
def test_card_is_keyboard_approvable(qtbot: QtBot, key: Qt.Key, decision: Decision) -> None:
    card = ToolCallCard(ToolCall("c1", "calculator", {"expression": "1+1"}))
    qtbot.addWidget(card)
    card.set_asking(True)
    with qtbot.waitSignal(card.decided, timeout=WAIT_MS) as signal:
        qtbot.keyClick(card, key)
    assert signal.args == [decision]
    assert not card.asking  # answered once; later keys do nothing


def test_enter_presses_the_focused_button(qtbot: QtBot) -> None:
    card = ToolCallCard(ToolCall("c1", "calculator", {"expression": "1+1"}))
    qtbot.addWidget(card)
    card.show()
    card.set_asking(True)
    card.deny.setFocus()
    with qtbot.waitSignal(card.decided, timeout=WAIT_MS) as signal:
        qtbot.keyClick(card.deny, Qt.Key.Key_Return)
    assert signal.args == [Decision.DENY]


def reopen_after_new_chat(chat: Chat) -> None:
    """Start a new chat, then open the conversation that was on screen again from history."""
    history = chat.controller.history
    assert history is not None and history.conversation_id is not None
    first = history.conversation_id
    chat.qtbot.mouseClick(chat.window.header.new_chat, Qt.MouseButton.LeftButton)
    chat.wait_idle()
    opening = asyncio.ensure_future(chat.controller.open_conversation(first))
    chat.qtbot.waitUntil(opening.done, timeout=WAIT_MS)


def test_an_approved_call_runs_and_the_answer_streams(make_chat: Callable[..., Chat]) -> None:
    chat, area = tool_chat(make_chat, CALC, "It is 42.")
    chat.type_and_send("what is 6*7?")
    card = wait_card(chat, area)
    assert json.loads(card.arguments.toPlainText()) == {"expression": "6 * 7"}
    chat.qtbot.keyClick(card, Qt.Key.Key_Return)
    reply = chat.wait_reply_finished()
    assert reply.answer_text() == "It is 42."
    assert "Result: 42" in card.status.text()
    assert "tool_call" not in reply.answer_text()


def test_the_card_asks_inline_in_the_reply_then_folds_into_a_used_line(make_chat: Callable[..., Chat]) -> None:
    chat, area = tool_chat(make_chat, "Let me calculate that. " + CALC, "It is 42.")
    chat.type_and_send("what is 6*7?")
    card = wait_card(chat, area)
    reply = chat.reply()
    assert card in reply.tool_cards() and card.isVisibleTo(chat.window)  # in the reply, not on the chrome
    assert card.approve.hasFocus() or card.hasFocus() or not chat.window.isActiveWindow()
    assert [b.text().replace("&", "") for b in (card.approve, card.always, card.deny)] == [
        "Approve",
        "Always allow",
        "Deny",
    ]
    chat.qtbot.keyClick(card, Qt.Key.Key_Y)
    chat.wait_reply_finished()
    assert card.summary.full_text() == "Used calculator → 42"
    assert not card.expanded  # folded once it ran
    chat.qtbot.mouseClick(card.summary, Qt.MouseButton.LeftButton)
    assert card.expanded and "Result: 42" in card.status.text()


def test_a_reopened_conversation_redraws_its_tool_calls(make_chat: Callable[..., Chat]) -> None:
    chat, area = tool_chat(make_chat, CALC, "It is 42.", "Hi.")
    chat.type_and_send("what is 6*7?")
    chat.qtbot.keyClick(wait_card(chat, area), Qt.Key.Key_Y)
    chat.wait_reply_finished()
    reopen_after_new_chat(chat)
    (card,) = chat.reply().tool_cards()
    assert isinstance(card, ToolCallCard) and card.summary.full_text() == "Used calculator → 42"
    assert not card.asking


def _top(reply: AssistantMessage, widget: QWidget) -> int:
    return widget.mapTo(reply, widget.rect().topLeft()).y()


def _reading_order(chat: Chat) -> tuple[str, str, int, int, int]:
    """The reply's lead text, its answer text, and the tops of lead, first card and answer."""
    reply = chat.reply()
    chat.qtbot.waitUntil(lambda: reply.answer.isVisible() and reply.lead.isVisible(), timeout=WAIT_MS)
    card = reply.tool_cards()[0]
    tops = (_top(reply, reply.lead), _top(reply, card), _top(reply, reply.answer))
    return (shown_text(reply.lead), shown_text(reply.answer), *tops)


def test_text_before_a_tool_call_stays_above_its_card_live_and_reopened(make_chat: Callable[..., Chat]) -> None:
    chat, area = tool_chat(make_chat, "Let me calculate that. " + CALC, "It is 42.", "Hi.")
    chat.type_and_send("what is 6*7?")
    chat.qtbot.keyClick(wait_card(chat, area), Qt.Key.Key_Y)
    reply = chat.wait_reply_finished()
    assert reply.answer_text() == "Let me calculate that. \n\nIt is 42."  # Copy takes the whole answer
    lead, rest, lead_y, card_y, answer_y = _reading_order(chat)
    assert (lead.strip(), rest.strip()) == ("Let me calculate that.", "It is 42.")
    assert lead_y < card_y < answer_y  # in the order they were written
    reopen_after_new_chat(chat)
    lead, rest, lead_y, card_y, answer_y = _reading_order(chat)
    assert (lead.strip(), rest.strip()) == ("Let me calculate that.", "It is 42.")
    assert lead_y < card_y < answer_y


def test_a_denied_call_never_runs(make_chat: Callable[..., Chat]) -> None:
    chat, area = tool_chat(make_chat, CALC, "Fine.")
    chat.type_and_send("what is 6*7?")
    chat.qtbot.keyClick(wait_card(chat, area), Qt.Key.Key_N)
    assert chat.wait_reply_finished().answer_text() == "Fine."
    assert scripted(chat).requests[1].messages[-1]["content"].startswith("The user denied")


def test_stop_while_asking_denies_and_ends_the_turn(make_chat: Callable[..., Chat]) -> None:
    chat, area = tool_chat(make_chat, CALC, "unused")
    chat.type_and_send("what is 6*7?")
    wait_card(chat, area)
    chat.qtbot.keyClick(chat.window, Qt.Key.Key_Escape)  # as the user stops it
    chat.wait_idle()
    assert len(scripted(chat).requests) == 1
    (card,) = area.cards.values()
    assert not card.asking and card.summary.full_text() == "Denied calculator"  # the card says what came of it
    assert chat.reply().status.text().startswith("Stopped")


def test_always_allow_holds_for_the_conversation_and_is_recorded(make_chat: Callable[..., Chat]) -> None:
    chat, area = tool_chat(make_chat, CALC, "42.", f"<tool_call>{calc_call('1+1')}</tool_call>", "2.")
    chat.type_and_send("6*7?")
    chat.qtbot.keyClick(wait_card(chat, area), Qt.Key.Key_A)
    chat.wait_reply_finished()
    chat.type_and_send("1+1?")
    chat.qtbot.waitUntil(lambda: len(scripted(chat).requests) == 4, timeout=WAIT_MS)
    chat.wait_idle()
    (card,) = area.cards.values()
    assert not card.asking and "Result: 2" in card.status.text()  # shown, not asked
    assert card.summary.full_text() == "Ran calculator automatically (always allowed) → 2"
    # The second turn's prompt has the first turn's call and result back before its answer.
    replayed = scripted(chat).requests[2].messages
    roles = [m["role"] for m in replayed]
    assert roles[-5:] == ["user", "assistant", "tool", "assistant", "user"]
    assert replayed[-3]["content"] == "42" and replayed[-4].get("tool_calls", [])[0]["function"]["name"] == "calculator"
    with HistoryStore(ember_paths().history_db) as store:
        conv = store.latest_conversation()
        assert conv is not None and conv.settings["tools_always"] == ["calculator"]
        records = [m.stats.get("tools") for m in store.path(conv.id) if m.role == "assistant"]
        assert [r[0]["approval"] for r in records if r] == ["approved_always", "always"]

    # The choice can be undone: unticking the tool in "Allowed" makes it ask again.
    menu = chat.window.tool_allowed
    menu.aboutToShow.emit()
    (action,) = menu.actions()
    assert action.text() == "calculator" and action.isChecked()
    action.setChecked(False)
    assert chat.window.tools.permissions().always == set()


def test_the_toggle_is_per_conversation_and_off_means_todays_behaviour(
    make_chat: Callable[..., Chat], tmp_path: Path
) -> None:
    chat, area = tool_chat(make_chat, "Hi.", CALC, "Recovered.")
    chat.type_and_send("hello")
    chat.wait_reply_finished()
    toggle = chat.window.tool_toggle
    chat.qtbot.mouseClick(chat.window.header.new_chat, Qt.MouseButton.LeftButton)
    chat.qtbot.waitUntil(lambda: not toggle.isChecked(), timeout=WAIT_MS)  # a new conversation starts off
    chat.type_and_send("6*7?")
    reply = chat.wait_reply_finished()
    assert area.cards == {}
    assert reply.answer_text() == "Recovered."  # stripped and recovered, exactly as without tools
    assert scripted(chat).requests[1].tools is None


@pytest.mark.slow
def test_mcp_servers_are_switchable_per_conversation_and_run_after_approval(make_chat: Callable[..., Chat]) -> None:
    import sys

    from engine.tools.mcp_config import ServerConfig
    from engine.tools.mcp_tools import McpServers

    stub = str(Path(__file__).with_name("mcp_stub_server.py"))
    pool = McpServers({m: ServerConfig(m, sys.executable, (stub, m)) for m in ("boom", "ok")})
    chat = make_chat(
        '<tool_call>{"name": "shout", "arguments": {"text": "hey"}}</tool_call>',
        "Done.",
        options=WindowOptions(mcp=lambda: pool),
    )
    turns = chat.window.tools
    menu = chat.window.tool_mcp
    assert menu is not None
    assert [a.text() for a in menu.actions()] == ["boom", "ok"]
    assert not any(s.running for s in pool.servers.values())  # nothing starts before it is needed
    chat.window.tool_toggle.setChecked(True)
    for action in menu.actions():
        action.setChecked(True)
    assert turns.mcp_servers() == ["boom", "ok"]
    area: ToolCardArea = chat.window.tool_cards
    chat.type_and_send("shout hey")
    chat.qtbot.waitUntil(lambda: bool(area.cards) and next(iter(area.cards.values())).asking, timeout=60_000)
    notices = [w.text() for w in area.notices]
    assert len(notices) == 1 and notices[0].startswith("MCP server boom could not start")
    chat.qtbot.keyClick(next(iter(area.cards.values())), Qt.Key.Key_Y)
    assert chat.wait_reply_finished(timeout=30_000).answer_text() == "Done."
    assert "Result: HEY!" in next(iter(area.cards.values())).status.text()
    chat.window.close()  # the servers stop with the window
    assert not pool.servers["ok"].running
