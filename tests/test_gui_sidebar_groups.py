"""The sidebar's date headers (shown, passed over by keys and clicks, kept across pages) and the archive."""

from __future__ import annotations

import time
from collections.abc import Callable

from gui_helpers import WAIT_MS, Chat, earlier_today
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMenu
from pytestqt.qtbot import QtBot

from desktop.qt.history.conversation_list import ConversationList
from desktop.qt.history.date_groups import date_group
from desktop.qt.history.row_delegate import HEADER_ROLE, TIME_ROLE
from desktop.qt.history.sidebar import HistorySidebar
from engine.history.store import HistoryStore
from engine.history.types import Conversation

pytest_plugins = ["gui_helpers"]

MakeChat = Callable[..., Chat]
DAY = 24 * 3600.0


def sidebar_and_store(chat: Chat) -> tuple[HistorySidebar, HistoryStore]:
    sidebar = chat.window.sidebar
    assert isinstance(sidebar, HistorySidebar) and chat.controller.history is not None
    return sidebar, chat.controller.history.store


def add(store: HistoryStore, title: str, updated: float) -> int:
    conv = store.create_conversation(title=title).id
    store.add_message(conv, "user", f"about {title.lower()}", parent_id=None)
    store.set_timestamps(conv, created_at=updated, updated_at=updated)
    return conv


def refreshed(qtbot: QtBot, sidebar: HistorySidebar) -> None:
    read = sidebar.refresh()
    qtbot.waitUntil(read.done, timeout=WAIT_MS)


def conversation(cid: int, updated: float) -> Conversation:
    return Conversation(cid, f"c{cid}", "", {}, updated, updated, None, None, False)


def test_the_list_is_grouped_by_date_and_the_keys_pass_over_the_headers(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat()
    sidebar, store = sidebar_and_store(chat)
    now = time.time()
    stamps = (earlier_today(60, now), now - DAY, now - 3 * DAY, now - 90 * DAY)
    today, yesterday, week, old = (add(store, t, s) for t, s in zip(("A", "B", "C", "D"), stamps, strict=True))
    refreshed(qtbot, sidebar)
    listing = sidebar.list
    assert (
        listing.headers()
        == [date_group(s, now) for s in stamps]
        == [
            "Today",
            "Yesterday",
            "Previous 7 days",
            date_group(stamps[3], now),
        ]
    )
    assert listing.conversation_ids() == [today, yesterday, week, old] and listing.count() == 8
    row = listing.item_of(yesterday)
    assert row is not None and row.data(TIME_ROLE) == time.strftime("%H:%M", time.localtime(stamps[1]))
    header = listing.item(0)
    assert header.data(HEADER_ROLE) and header.flags() == Qt.ItemFlag.NoItemFlags  # not selectable nor focusable
    listing.setFocus()
    listing.select_conversation(today)
    moves = {Qt.Key.Key_Down: [yesterday, week, old, old], Qt.Key.Key_Up: [week, yesterday, today, today]}
    for key, expected in moves.items():
        seen: list[int | None] = []
        for _ in expected:
            qtbot.keyClick(listing, key)
            seen.append(listing.current_id())
        assert seen == expected  # never a header, and no step lost on one
    qtbot.keyClick(listing, Qt.Key.Key_End)
    assert listing.current_id() == old
    qtbot.keyClick(listing, Qt.Key.Key_Home)
    assert listing.current_id() == today  # not the "Today" header above it


def test_a_header_opens_nothing_and_has_no_menu(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat()
    sidebar, store = sidebar_and_store(chat)
    add(store, "Only", earlier_today(60))
    refreshed(qtbot, sidebar)
    opened: list[int] = []
    sidebar.list.openRequested.connect(lambda cid, _m: opened.append(cid))
    header = sidebar.list.visualItemRect(sidebar.list.item(0)).center()
    qtbot.mouseClick(sidebar.list.viewport(), Qt.MouseButton.LeftButton, pos=header)
    qtbot.mouseDClick(sidebar.list.viewport(), Qt.MouseButton.LeftButton, pos=header)
    assert opened == [] and not sidebar.list.editing and sidebar.list.current_id() is None
    menus = len(sidebar.findChildren(QMenu))
    sidebar._show_context_menu(header)  # pyright: ignore[reportPrivateUsage]
    assert len(sidebar.findChildren(QMenu)) == menus


def test_a_next_page_continuing_a_group_does_not_repeat_its_header(qtbot: QtBot) -> None:
    listing = ConversationList()
    qtbot.addWidget(listing)
    now = time.time()
    today = [earlier_today(s, now) for s in (60, 120, 180)]
    listing.show_conversations([conversation(1, today[0]), conversation(2, today[1])], None, now)
    listing.append_conversations([conversation(3, today[2]), conversation(4, now - 400 * DAY)], now)
    last = listing.item_of(4)
    assert last is not None and not last.data(TIME_ROLE).endswith(listing.headers()[-1][-4:])  # the header has the year
    assert listing.headers() == ["Today", date_group(now - 400 * DAY, now)]
    assert [listing.item(r).data(HEADER_ROLE) or False for r in range(listing.count())] == [
        True,
        False,
        False,
        False,
        True,
        False,
    ]
    listing.remove_conversation(4)  # alone under its header: the header goes too
    assert listing.headers() == ["Today"] and listing.count() == 4
    listing.remove_conversation(2)
    assert listing.conversation_ids() == [1, 3] and listing.headers() == ["Today"]


def test_archive_and_unarchive_round_trip_from_the_keyboard(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat()
    sidebar, store = sidebar_and_store(chat)
    now = time.time()
    kept, shelved = add(store, "Kept", earlier_today(120, now)), add(store, "Shelved", earlier_today(60, now))
    refreshed(qtbot, sidebar)
    assert not sidebar.archive_toggle.isVisible()  # nothing archived yet
    sidebar.list.setFocus()
    sidebar.list.select_conversation(shelved)
    qtbot.keyClick(sidebar.list, Qt.Key.Key_E, Qt.KeyboardModifier.ControlModifier)
    assert sidebar.list.conversation_ids() == [kept]  # at once; the write follows
    qtbot.waitUntil(lambda: sidebar.archive_toggle.isVisible(), timeout=WAIT_MS)
    assert store.archived_count() == 1 and [m.content for m in store.path(shelved)] == ["about shelved"]
    assert sidebar.archive_toggle.text() == "Archived (1)  →"
    assert sidebar.undo_bar.label.text() == "Archived “Shelved”."
    qtbot.mouseClick(sidebar.archive_toggle, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: sidebar.list.conversation_ids() == [shelved], timeout=WAIT_MS)
    assert sidebar.archive_heading.isVisible() and sidebar.list.headers() == ["Today"]
    sidebar.list.setFocus()
    sidebar.list.select_conversation(shelved)
    qtbot.keyClick(sidebar.list, Qt.Key.Key_E, Qt.KeyboardModifier.ControlModifier)  # unarchives here
    qtbot.waitUntil(lambda: store.archived_count() == 0 and sidebar.empty_label.isVisible(), timeout=WAIT_MS)
    assert sidebar.empty_label.text().startswith("Nothing archived")
    qtbot.mouseClick(sidebar.archive_toggle, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: sidebar.list.conversation_ids() == [shelved, kept], timeout=WAIT_MS)
    assert not sidebar.archive_heading.isVisible() and not sidebar.archive_toggle.isVisible()


def test_undo_takes_an_archived_conversation_back(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat()
    sidebar, store = sidebar_and_store(chat)
    conv = add(store, "Back", time.time() - 60)
    refreshed(qtbot, sidebar)
    task = sidebar.archive(conv)
    qtbot.waitUntil(task.done, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: sidebar.undo_bar.isVisible() and sidebar.list.conversation_ids() == [], timeout=WAIT_MS)
    qtbot.mouseClick(sidebar.undo_bar.action_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: sidebar.list.conversation_ids() == [conv], timeout=WAIT_MS)
    assert store.archived_count() == 0


def test_the_menu_offers_archive_beside_delete_and_search_marks_archived_hits(
    make_chat: MakeChat, qtbot: QtBot
) -> None:
    chat = make_chat()
    sidebar, store = sidebar_and_store(chat)
    now = time.time()
    shelved = add(store, "Pumpkin soup", now - 60)
    add(store, "Pumpkin pie", now - 120)
    refreshed(qtbot, sidebar)
    row = sidebar.list.item_of(shelved)
    assert row is not None
    sidebar._show_context_menu(sidebar.list.visualItemRect(row).center())  # pyright: ignore[reportPrivateUsage]
    menu = sidebar.findChildren(QMenu)[-1]
    texts = [a.text() for a in menu.actions() if not a.isSeparator()]
    assert texts[-2:] == ["Archive\tCtrl+E", "Delete…\tDel"]
    menu.close()
    qtbot.waitUntil(sidebar.archive(shelved).done, timeout=WAIT_MS)
    sidebar.search.setText("pumpkin")
    qtbot.waitUntil(lambda: len(sidebar.list.conversation_ids()) == 2, timeout=WAIT_MS)
    assert sidebar.list.headers() == []  # search hits are not grouped
    hit = sidebar.list.item_of(shelved)
    assert hit is not None and hit.data(TIME_ROLE) == "Archived"
    sidebar._show_context_menu(sidebar.list.visualItemRect(hit).center())  # pyright: ignore[reportPrivateUsage]
    menu = sidebar.findChildren(QMenu)[-1]
    assert "Unarchive\tCtrl+E" in [a.text() for a in menu.actions()]
    menu.close()
