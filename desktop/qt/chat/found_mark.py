"""The message a sidebar search found, marked in the conversation it opened.

Opening a search result shows its conversation at that message, not at the end: the message
is scrolled into view with a tinted frame, and in an answer the words searched for are
highlighted, so the eye lands on what was searched for.
"""

from __future__ import annotations

import re

from PySide6.QtGui import QColor, QTextCharFormat, QTextCursor, QTextDocument
from PySide6.QtWidgets import QTextBrowser, QTextEdit, QWidget

from desktop.qt.look.appearance import current_palette

FOUND = "found"  # the dynamic property the style sheet tints (`#UserBubble[found="true"]`, ...)
MAX_MARKS = 200  # words highlighted per text part at most: a common word must not cost seconds


def query_words(query: str) -> list[str]:
    """The words of a search, as the history search matches them (quotes and operators left out)."""
    return [w for w in re.findall(r"\w+", query) if len(w) > 1 or w.isdigit()]


def mark_found(message: QWidget, query: str) -> None:
    """Tint `message` (a question or an answer) and highlight the query's words in its text."""
    targets = [message, *message.findChildren(QWidget, "UserBubble"), *message.findChildren(QWidget, "AnswerText")]
    for widget in targets:
        widget.setProperty(FOUND, True)
        widget.style().unpolish(widget)
        widget.style().polish(widget)
    words = query_words(query)
    if not words:
        return
    for view in message.findChildren(QTextBrowser):
        _highlight(view, words)


def is_marked(message: QWidget) -> bool:
    return bool(message.property(FOUND))


def _highlight(view: QTextBrowser, words: list[str]) -> None:
    look = QTextCharFormat()
    palette = current_palette()
    look.setBackground(QColor(palette.warning_bg))
    look.setForeground(QColor(palette.warning_text))
    marks: list[QTextEdit.ExtraSelection] = []
    document = view.document()
    for word in words:
        cursor = QTextCursor(document)
        while len(marks) < MAX_MARKS:
            cursor = document.find(word, cursor, QTextDocument.FindFlag(0))
            if cursor.isNull():
                break
            mark = QTextEdit.ExtraSelection()
            mark.cursor = cursor  # type: ignore[attr-defined]
            mark.format = look  # type: ignore[attr-defined]
            marks.append(mark)
    view.setExtraSelections(marks)
