"""Widgets that show an answer: rendered Markdown runs and code blocks with a Copy button.

`AnswerView` applies `MarkdownStream` updates: frozen parts keep their widgets untouched,
so a streaming update re-renders only the text after the last frozen part.
"""

from __future__ import annotations

import math

from PySide6.QtCore import QSize, QSizeF, Qt, QTimer, QUrl
from PySide6.QtGui import QDesktopServices, QGuiApplication, QTextCursor, QTextDocument, QTextOption
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QSizePolicy,
    QTextBrowser,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from desktop.core.citations import link_citations
from desktop.core.markdown_blocks import MATH_SCHEME, MarkdownStream, Part, Update, math_source
from desktop.qt.answer.citations import CitationActions, cite_number
from desktop.qt.answer.code_highlight import CodeHighlighter
from desktop.qt.answer.math_render import fallback_image, math_image, text_descent, text_pixel_size
from desktop.qt.look.appearance import code_font, current_palette
from desktop.qt.look.icons import set_icon, themed_icon
from desktop.qt.look.stylesheet import document_css

SAFE_LINK_SCHEMES = frozenset({"http", "https", "mailto"})
COPIED_FEEDBACK_MS = 1500
STREAM_COLOUR_CHARS = 20_000  # a block this long when first shown is coloured once it settles, not at once
HIGHLIGHT_SETTLE_MS = 800  # a streaming block that pauses this long is coloured meanwhile
CODE_MARGIN = 8


def open_link(url: QUrl) -> None:
    """Links open only on a click, only in the system browser, only for web/mail schemes."""
    if url.scheme().lower() in SAFE_LINK_SCHEMES:
        QDesktopServices.openUrl(url)


def discard(widget: QWidget) -> None:
    """Take a widget out of the tree now (deleteLater alone leaves it findable until then)."""
    widget.hide()
    widget.setParent(None)
    widget.deleteLater()


def copy_to_clipboard(text: str) -> None:
    QGuiApplication.clipboard().setText(text)


class CopyButton(QToolButton):
    """A small Copy button (icon, and its label unless `icon_only`) that says "Copied" for a moment."""

    def __init__(
        self, label: str, accessible_name: str, parent: QWidget | None = None, *, icon_only: bool = False
    ) -> None:
        super().__init__(parent)
        self._label = label
        self.setText(label)
        self.setAutoRaise(True)
        self.setAccessibleName(accessible_name)
        self.setToolTip(accessible_name)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        style = Qt.ToolButtonStyle.ToolButtonIconOnly if icon_only else Qt.ToolButtonStyle.ToolButtonTextBesideIcon
        self.setToolButtonStyle(style)
        set_icon(self, "copy", current_palette().muted, 16)

    def flash_copied(self) -> None:
        self.setText("Copied")
        self.setToolTip("Copied")
        set_icon(self, "copied", current_palette().muted, 16)
        QTimer.singleShot(COPIED_FEEDBACK_MS, self, self._restore)

    def _restore(self) -> None:
        self.setText(self._label)
        self.setToolTip(self.accessibleName())
        set_icon(self, "copy", current_palette().muted, 16)


class TextSegment(QTextBrowser):
    """A run of rendered Markdown, as tall as its text (the conversation scrolls, not it)."""

    def __init__(self, parent: QWidget | None = None, citations: CitationActions | None = None) -> None:
        super().__init__(parent)
        self._html = ""
        self.raw_html = ""  # the part's HTML before `[n]` references became links
        self.citations = citations
        self.setObjectName("AnswerText")
        self.setAccessibleName("Answer")
        self.setOpenLinks(False)
        self.setOpenExternalLinks(False)
        self.anchorClicked.connect(self._on_anchor)
        self.highlighted.connect(self._on_hover)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.viewport().setAutoFillBackground(False)
        self.setStyleSheet("QTextBrowser { background: transparent; }")
        self.document().setDocumentMargin(0)
        self.document().setDefaultStyleSheet(document_css(current_palette()))
        self.document().documentLayout().documentSizeChanged.connect(self._fit_height)
        self.setFixedHeight(self.fontMetrics().lineSpacing())
        self.setCursorWidth(0)  # read-only: no caret (its focus shows as the accent edge)

    def set_html(self, html: str) -> None:
        self.raw_html = html
        if self.citations is not None and self.citations.sources:
            html = link_citations(html, self.citations.sources.keys())
        if html != self._html:
            self._html = html
            self.setHtml(html)

    def _on_anchor(self, url: QUrl) -> None:
        n = cite_number(url)
        if n is None:
            open_link(url)
        elif self.citations is not None:
            self.citations.open(n, self)

    def _on_hover(self, url: QUrl) -> None:
        if self.citations is not None:
            self.citations.hover(cite_number(url) if not url.isEmpty() else None, self)

    def refresh_style(self) -> None:
        self.document().setDefaultStyleSheet(document_css(current_palette()))
        self.setHtml(self._html)

    def loadResource(self, type: int, name: QUrl | str) -> object:
        # Nothing is ever fetched for a model's answer: not from the network, not from disk.
        # The only images are the answer's own math, drawn here from its TeX.
        url = QUrl(name) if isinstance(name, str) else name
        if type != QTextDocument.ResourceType.ImageResource.value or url.scheme() != MATH_SCHEME:
            return None
        source = math_source(url.path())
        if source is None:
            return None
        tex, display = source
        colour = current_palette().text
        font = self.font()
        image = math_image(tex, display, text_pixel_size(font), colour, self.devicePixelRatioF(), text_descent(font))
        return image if image is not None else fallback_image(tex, self.font(), colour)

    def sizeHint(self) -> QSize:
        return QSize(super().sizeHint().width(), self.height())

    def _fit_height(self, size: QSizeF) -> None:
        self.setFixedHeight(max(1, math.ceil(size.height())))


class CodeBlock(QFrame):
    """A code block: highlighted monospace, never wrapped (long lines scroll), language and Copy on top."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("CodeBlock")
        self._code = ""
        self._lines = 1
        self._lang = QLabel(self)
        self._lang.setObjectName("CodeLang")
        self._lang.setAccessibleName("Code language")
        self._copy = CopyButton("Copy", "Copy code", self)
        self._copy.setObjectName("MessageAction")
        self._copy.clicked.connect(self._on_copy_clicked)
        self._body = self._make_body()
        self._highlighter = CodeHighlighter(self, current_palette().syntax)
        # Colours come once the code stops changing for a moment (a streaming block stays plain).
        self._settle = QTimer(self)
        self._settle.setSingleShot(True)
        self._settle.setInterval(HIGHLIGHT_SETTLE_MS)
        self._settle.timeout.connect(lambda: self._highlighter.attach(self._body.document()))
        head = QFrame(self)
        head.setObjectName("CodeHeader")
        header = QHBoxLayout(head)
        header.setContentsMargins(CODE_MARGIN + 4, 2, 4, 2)
        header.addWidget(self._lang)
        header.addStretch(1)
        header.addWidget(self._copy)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(1, 1, 1, 1)
        layout.setSpacing(0)
        layout.addWidget(head)
        layout.addWidget(self._body)

    def _make_body(self) -> QPlainTextEdit:
        body = QPlainTextEdit(self)
        body.setReadOnly(True)
        body.setFont(code_font())
        body.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        body.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        body.setFrameShape(QFrame.Shape.NoFrame)
        body.setTabChangesFocus(True)
        body.document().setDocumentMargin(CODE_MARGIN)
        body.setAccessibleName("Code")
        body.horizontalScrollBar().rangeChanged.connect(lambda *_: self._fit_height())
        return body

    def settle(self) -> None:
        """The code is complete: colour it (once; later calls cost nothing)."""
        self._settle.stop()
        self._highlighter.attach(self._body.document())

    @property
    def highlighted(self) -> bool:
        """Whether the block's language is known and its code coloured."""
        return self._highlighter.active and self._highlighter.attached

    def refresh_style(self) -> None:
        self._body.setFont(code_font())
        self._highlighter.set_syntax(current_palette().syntax)
        self._copy.setIcon(themed_icon("copy", current_palette().muted))
        self._fit_height()

    @property
    def code(self) -> str:
        return self._code

    def set_code(self, code: str, lang: str) -> None:
        self._lang.setText(lang or "code")
        self._highlighter.set_language(lang)
        if code == self._code:
            return
        if code.startswith(self._code):
            # Streaming only ever appends: insert the new tail instead of resetting the text. The
            # highlighter lexes line by line, so it colours just the new lines as they stream
            # (no plain grey block that flips to colour when the reply ends).
            if not self._highlighter.attached and len(self._code) <= STREAM_COLOUR_CHARS:
                self._highlighter.attach(self._body.document())
            elif not self._highlighter.attached:
                self._settle.start()
            tail = code[len(self._code) :]
            cursor = QTextCursor(self._body.document())
            cursor.movePosition(QTextCursor.MoveOperation.End)
            cursor.insertText(tail)
            self._lines += tail.count("\n")
        else:
            self._highlighter.detach()  # rewritten: coloured once it settles
            self._settle.start()
            self._body.setPlainText(code)
            self._lines = code.count("\n") + 1
        self._code = code
        self._fit_height()

    def _fit_height(self) -> None:
        bar = self._body.horizontalScrollBar()
        extra = bar.sizeHint().height() if bar.maximum() > 0 else 0
        margin = 2 * math.ceil(self._body.document().documentMargin())
        self._body.setFixedHeight(self._lines * self._body.fontMetrics().lineSpacing() + margin + extra)

    def _on_copy_clicked(self) -> None:
        copy_to_clipboard(self._code)
        self._copy.flash_copied()


PartWidget = TextSegment | CodeBlock


class AnswerView(QWidget):
    """The answer as a column of part widgets, updated from a `MarkdownStream`."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._stream = MarkdownStream()
        self._widgets: list[PartWidget] = []
        self.citations = CitationActions()
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(8)

    def show_text(self, text: str, *, final: bool = False) -> None:
        self.apply(self._stream.update(text, final=final))
        # A code block followed by another part is complete: colour it now, once. The last one
        # may still grow; it is coloured when the reply ends or its text stops changing.
        done = self._widgets if final else self._widgets[:-1]
        for widget in done:
            if isinstance(widget, CodeBlock):
                widget.settle()

    def apply(self, update: Update) -> None:
        for i, part in enumerate(update.parts, start=update.base):
            self._show_part(i, part)
        for widget in self._widgets[update.base + len(update.parts) :]:
            discard(widget)
        del self._widgets[update.base + len(update.parts) :]

    def reset(self) -> None:
        for widget in self._widgets:
            discard(widget)
        self._widgets.clear()
        self._stream = MarkdownStream()

    def set_sources(self, actions: CitationActions) -> None:
        """The reply's sources: `[n]` references in the text become links to them."""
        self.citations = actions
        for widget in self._widgets:
            if isinstance(widget, TextSegment):
                widget.citations = actions
                widget.set_html(widget.raw_html)

    def part_widgets(self) -> list[PartWidget]:
        return list(self._widgets)

    def refresh_style(self) -> None:
        for widget in self._widgets:
            widget.refresh_style()

    def _show_part(self, index: int, part: Part) -> None:
        widget = self._widgets[index] if index < len(self._widgets) else None
        wanted = TextSegment if part.kind == "text" else CodeBlock
        if not isinstance(widget, wanted):
            widget = self._replace(
                index, TextSegment(citations=self.citations) if wanted is TextSegment else CodeBlock()
            )
        if isinstance(widget, TextSegment):
            widget.set_html(part.html)
        else:
            widget.set_code(part.source, part.lang)

    def _replace(self, index: int, widget: PartWidget) -> PartWidget:
        if index < len(self._widgets):
            old = self._widgets[index]
            self._layout.replaceWidget(old, widget)
            discard(old)
            self._widgets[index] = widget
        else:
            self._layout.addWidget(widget)
            self._widgets.append(widget)
        return widget
