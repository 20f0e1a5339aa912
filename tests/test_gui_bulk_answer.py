"""A huge reply, or one with no spaces or newlines, never freezes the window (issue #14).

It is shown as plain text a slice per event-loop turn; the answer itself (Copy, history) is
exact. The stall figures are measured by `ember bench` (tests/tools/stall_bench.py), not here.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from gui_helpers import WAIT_MS, Chat
from hypothesis import given, settings
from hypothesis import strategies as st
from pytestqt.qtbot import QtBot

from desktop.qt.answer.bulk_text import (
    DISPLAY_LINE_CHARS,
    PARAGRAPH_CHARS,
    BulkTextView,
    LineCutter,
    display_lines,
    needs_bulk_view,
)
from tests.tools.stall_bench import huge_piece, measure_ui_stall

pytest_plugins = ["gui_helpers"]

MakeChat = Callable[..., Chat]


def test_one_huge_piece_is_a_bulk_answer_with_the_exact_text(make_chat: MakeChat, qtbot: QtBot) -> None:
    [text] = huge_piece(1_000_000)
    chat = make_chat(text)
    chat.type_and_send("go")
    reply = chat.wait_reply_finished()
    qtbot.waitUntil(reply.on_screen, timeout=WAIT_MS)
    assert reply.answer_text() == text
    bulk = reply.findChild(BulkTextView)
    assert bulk is not None and bulk.isVisible()
    assert not reply.answer.isVisible()
    assert bulk.toPlainText().replace("\n", "") == text
    assert bulk.document().blockCount() == len(text) // DISPLAY_LINE_CHARS


def test_an_ordinary_reply_stays_markdown(make_chat: MakeChat) -> None:
    chat = make_chat("Just **a few** words.")
    chat.type_and_send("go")
    reply = chat.wait_reply_finished()
    assert reply.findChild(BulkTextView) is None
    assert reply.answer.isVisible()


def test_a_stored_huge_reply_opens_as_bulk_text(make_chat: MakeChat, qtbot: QtBot) -> None:
    chat = make_chat("y" * 300_000)
    chat.type_and_send("go")
    reply = chat.wait_reply_finished()
    from desktop.qt.chat.message_view import AssistantMessage

    again = AssistantMessage()
    qtbot.addWidget(again)
    again.show_stored(reply.answer_text(), "", "complete")
    qtbot.waitUntil(again.on_screen, timeout=WAIT_MS)
    assert again.findChild(BulkTextView) is not None
    assert again.answer_text() == "y" * 300_000


def test_needs_bulk_view_limits() -> None:
    assert not needs_bulk_view("word " * 1000)
    assert needs_bulk_view("x" * 10_001)
    assert not needs_bulk_view(("x" * 9_000 + "\n") * 10)
    assert needs_bulk_view("a b\n" * 60_000)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="ab. \n", max_size=300), min_size=1, max_size=6))
def test_display_lines_cut_appended_pieces_like_the_whole(pieces: list[str]) -> None:
    bounds = {"run": 5, "paragraph": 20}  # small, so that every kind of cut happens
    whole = display_lines("".join(pieces), **bounds)
    cutter = LineCutter(**bounds)
    assert "".join(cutter.feed(piece) for piece in pieces) == whole
    for line in whole.split("\n"):
        assert len(line) <= 20 + 2 * 5 + 1
        assert all(len(run) <= 5 for run in line.split(" "))  # an unbroken run is cut
    assert whole.replace("\n", "") == "".join(pieces).replace("\n", "")


def test_a_paragraph_of_words_stays_one_display_line_up_to_its_bound() -> None:
    paragraph = " ".join(f"Sentence {i} has words." for i in range(3_000))  # 70,000 characters
    lines = display_lines(paragraph).split("\n")
    assert len(lines) == 2 and len(lines[0]) >= PARAGRAPH_CHARS  # one cut, past the bound
    assert lines[0].rstrip().endswith(".")  # after a sentence's end
    assert display_lines("word " * 5_000) == "word " * 5_000  # 25,000 characters: not cut at all


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
def test_the_stall_bench_measures_the_huge_piece_case() -> None:
    result = measure_ui_stall(n_tokens=50, tokens_per_s=3000, huge_piece_chars=50_000)
    assert {"ui_huge_piece_max_stall_ms", "ui_huge_piece_p99_stall_ms", "ui_huge_piece_catchup_ms"} <= result.keys()


def test_one_huge_thinking_piece_keeps_its_raw_text_in_short_display_lines(qtbot: QtBot) -> None:
    from desktop.qt.answer.bulk_text import BULK_LINE_CHARS
    from desktop.qt.chat.thinking_pane import ThinkingPane

    pane = ThinkingPane()
    qtbot.addWidget(pane)
    pane.append("t" * 250_000)
    pane.append("u" * 100)
    assert pane.text() == "t" * 250_000 + "u" * 100
    doc = pane.body.document()
    lengths = [len(doc.findBlockByNumber(i).text()) for i in range(doc.blockCount())]
    assert max(lengths) <= BULK_LINE_CHARS and sum(lengths) == 250_100
