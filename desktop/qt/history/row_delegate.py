"""How a sidebar row looks: a conversation (title, when), a search hit (plus a snippet), or a date header.

The delegate paints all three by hand; a header row is not enabled, so the view's keyboard
moves and clicks pass over it.
"""

from __future__ import annotations

import time

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRect, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QGuiApplication, QPainter, QPalette
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem, QWidget

from desktop.qt.look.style import accent_fill, muted_text, subtle_fill
from engine.api.values import as_datetime

ID_ROLE = Qt.ItemDataRole.UserRole  # the conversation's id (None on a header)
TIME_ROLE = Qt.ItemDataRole.UserRole + 1
SNIPPET_ROLE = Qt.ItemDataRole.UserRole + 2  # a search hit's snippet, as (text, is_match) runs
MESSAGE_ROLE = Qt.ItemDataRole.UserRole + 3  # the matching message's id (None: the title matched)
HEADER_ROLE = Qt.ItemDataRole.UserRole + 4  # True on a date group's header row
ARCHIVED_ROLE = Qt.ItemDataRole.UserRole + 5  # the conversation is archived
PAD_X, PAD_Y, LINE_GAP = 10, 7, 2
UNTITLED = "New conversation"
_Index = QModelIndex | QPersistentModelIndex


def relative_time(ts: float, now: float | None = None) -> str:
    """When, as a sidebar says it: "now", "5 min", "3 h", "Yesterday", "Mon", "12 Mar", "12 Mar 2023"."""
    now = time.time() if now is None else now
    seconds = max(0.0, now - ts)
    if seconds < 60:
        return "now"
    if seconds < 3600:
        return f"{int(seconds // 60)} min"
    then, today = as_datetime(ts), as_datetime(now)
    days = (today.date() - then.date()).days
    if days == 0:
        return f"{int(seconds // 3600)} h"
    if days == 1:
        return "Yesterday"
    if days < 7:
        return then.strftime("%a")
    if then.year == today.year:
        return f"{then.day} {then.strftime('%b')}"
    return f"{then.day} {then.strftime('%b')} {then.year}"


def snippet_runs(
    parts: list[tuple[str, bool]], plain: QFontMetrics, bold: QFontMetrics, room: int
) -> list[tuple[str, bool]]:
    """The runs of a snippet that fit in `room` pixels, with its first matched word whole.

    In a narrow sidebar the words before the match can fill the line, so the match itself
    would be cut; the leading words give way to "…" first, then the end is elided.
    """

    def width(runs: list[tuple[str, bool]]) -> int:
        return sum((bold if match else plain).horizontalAdvance(text) for text, match in runs)

    first = next((i for i, (_text, match) in enumerate(parts) if match), None)
    runs = list(parts)
    if first and width(runs[: first + 1]) > room:
        before = "".join(text for text, _match in runs[:first]).removeprefix("…")
        while before and width([("…" + before, False), runs[first]]) > room:
            before = before.lstrip().partition(" ")[2]  # drop the first word
        runs = [("…" + before, False), *runs[first:]]
    shown: list[tuple[str, bool]] = []
    left = room
    for text, match in runs:
        metrics = bold if match else plain
        if metrics.horizontalAdvance(text) > left:
            shown.append((metrics.elidedText(text, Qt.TextElideMode.ElideRight, left), match))
            break
        shown.append((text, match))
        left -= metrics.horizontalAdvance(text)
    return shown


class ConversationDelegate(QStyledItemDelegate):
    """Paints a row: title (elided) with the time on the right; a snippet line under a search hit."""

    def sizeHint(self, option: QStyleOptionViewItem, index: _Index) -> QSize:
        line = option.fontMetrics.lineSpacing()
        lines = 2 if index.data(SNIPPET_ROLE) else 1
        return QSize(200, 2 * PAD_Y + lines * line + (lines - 1) * LINE_GAP)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: _Index) -> None:
        if index.data(HEADER_ROLE):
            self._paint_header(painter, option, str(index.data(Qt.ItemDataRole.DisplayRole)))
            return
        # Painted by hand rather than by the style: a soft tint for the open conversation
        # reads better in a sidebar than the style's strong selection colour.
        state = option.state
        # The application's palette: the list's own has a transparent Base (see the style sheet).
        palette = QGuiApplication.palette()
        metrics = option.fontMetrics
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        self._paint_background(
            painter,
            QRectF(option.rect).adjusted(2, 1, -2, -1),
            palette,
            selected=bool(state & QStyle.StateFlag.State_Selected),
            hovered=bool(state & QStyle.StateFlag.State_MouseOver),
        )
        rect = option.rect.adjusted(PAD_X, PAD_Y, -PAD_X, -PAD_Y)
        line = metrics.lineSpacing()
        title_rect = QRect(rect.left(), rect.top(), rect.width(), line)
        when = str(index.data(TIME_ROLE) or "")
        painter.setPen(muted_text(palette))
        painter.drawText(title_rect, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, when)
        title = str(index.data(Qt.ItemDataRole.DisplayRole) or UNTITLED)
        room = title_rect.width() - metrics.horizontalAdvance(when) - PAD_X
        painter.setPen(palette.color(QPalette.ColorRole.Text))
        painter.drawText(
            title_rect,
            Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
            metrics.elidedText(title, Qt.TextElideMode.ElideRight, room),
        )
        parts = index.data(SNIPPET_ROLE)
        if parts:
            snippet_rect = QRect(rect.left(), rect.top() + line + LINE_GAP, rect.width(), line)
            self._paint_snippet(painter, snippet_rect, parts, muted_text(palette), option.font)
        painter.restore()

    def _paint_header(self, painter: QPainter, option: QStyleOptionViewItem, label: str) -> None:
        """A group's label, small and muted, sitting low in its row: it belongs to the rows below."""
        font = QFont(option.font)
        font.setPointSizeF(font.pointSizeF() * 0.85)
        font.setWeight(QFont.Weight.DemiBold)
        painter.save()
        painter.setFont(font)
        painter.setPen(muted_text(QGuiApplication.palette()))
        rect = option.rect.adjusted(PAD_X, 0, -PAD_X, -LINE_GAP)
        painter.drawText(rect, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignBottom, label)
        painter.restore()

    def _paint_background(
        self, painter: QPainter, rect: QRectF, palette: QPalette, *, selected: bool, hovered: bool
    ) -> None:
        if not (selected or hovered):
            return
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(accent_fill(palette) if selected else subtle_fill(palette, 0.05))
        painter.drawRoundedRect(rect, 6, 6)

    def _paint_snippet(
        self, painter: QPainter, rect: QRect, parts: list[tuple[str, bool]], color: QColor, font: QFont
    ) -> None:
        """The snippet on one line, matched words bold, elided where it runs out of room."""
        bold = QFont(font)
        bold.setBold(True)
        painter.setPen(color)
        x = rect.left()
        for text, match in snippet_runs(parts, QFontMetrics(font), QFontMetrics(bold), rect.width()):
            painter.setFont(bold if match else font)
            painter.drawText(
                QRect(x, rect.top(), rect.right() - x, rect.height()),
                Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                text,
            )
            x += QFontMetrics(painter.font()).horizontalAdvance(text)

    def updateEditorGeometry(self, editor: QWidget, option: QStyleOptionViewItem, index: _Index) -> None:
        # The title editor sits where the title is drawn, not over the whole row.
        editor.setGeometry(option.rect.adjusted(PAD_X - 4, 3, -(PAD_X - 4), -3))
