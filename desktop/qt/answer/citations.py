"""A reply's sources in the window: `[n]` links whose hover shows the passage and whose click opens it.

`CitationActions` is shared by the answer's text (its `[n]` links) and the reply's sources row:
hovering a reference shows the passage (file, page, character range, text) in a tooltip;
clicking opens the file in the system's viewer (a PDF at its page, for viewers that take a
`#page=` fragment). The row lists every passage the prompt carried, so the sources are one
click away even when the model cites none.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtCore import QPoint, Qt, QUrl
from PySide6.QtGui import QCursor, QDesktopServices
from PySide6.QtWidgets import QLabel, QToolTip, QWidget

from desktop.core.citations import CITE_SCHEME
from engine.docs.context import label
from engine.events import SourceRef
from models.text import escaped as shown

TOOLTIP_CHARS = 700

Opener = Callable[[QUrl], bool]
_opener: Opener = QDesktopServices.openUrl


def set_opener(opener: Opener) -> Opener:
    """Replace how files are opened (tests); returns the previous opener."""
    global _opener
    previous, _opener = _opener, opener
    return previous


def source_url(ref: SourceRef) -> QUrl:
    url = QUrl.fromLocalFile(ref.path)
    if ref.page is not None:
        url.setFragment(f"page={ref.page}")
    return url


def passage_tooltip(ref: SourceRef) -> str:
    text = " ".join(ref.text.split())
    if len(text) > TOOLTIP_CHARS:
        text = text[:TOOLTIP_CHARS] + "…"
    where = html.escape(f"{shown(ref.path)} · characters {ref.start}–{ref.end}")
    return f"<p><b>[{ref.n}] {html.escape(label(ref))}</b><br><small>{where}</small></p><p>{html.escape(text)}</p>"


def cite_number(url: QUrl | str) -> int | None:
    """n for a `cite:n` link, else None."""
    text = url.toString() if isinstance(url, QUrl) else url
    scheme, _, rest = text.partition(":")
    return int(rest) if scheme == CITE_SCHEME and rest.isdigit() else None


class CitationActions:
    """Hover and click behaviour for one reply's references."""

    def __init__(self, sources: Sequence[SourceRef] = ()) -> None:
        self.sources = {s.n: s for s in sources}

    def hover(self, n: int | None, widget: QWidget, at: QPoint | None = None) -> None:
        ref = self.sources.get(n) if n is not None else None
        if ref is None:
            QToolTip.hideText()
            return
        QToolTip.showText(at if at is not None else QCursor.pos(), passage_tooltip(ref), widget)

    def open(self, n: int | None) -> bool:
        ref = self.sources.get(n) if n is not None else None
        if ref is None or not Path(ref.path).exists():
            return False
        return bool(_opener(source_url(ref)))


class SourcesRow(QLabel):
    """ "Sources: [1] report.pdf, page 2 · [2] notes.md" under an answer, each a reference link."""

    def __init__(self, actions: CitationActions, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("Muted")
        self.citations = actions
        self.setTextFormat(Qt.TextFormat.RichText)
        self.setWordWrap(True)
        self.setTextInteractionFlags(
            Qt.TextInteractionFlag.LinksAccessibleByMouse | Qt.TextInteractionFlag.LinksAccessibleByKeyboard
        )
        self.setOpenExternalLinks(False)
        self.setAccessibleName("Sources")
        self.linkHovered.connect(lambda link: self.citations.hover(cite_number(link) if link else None, self))
        self.linkActivated.connect(lambda link: self.citations.open(cite_number(link)))
        self.hide()

    def show_sources(self, sources: Sequence[SourceRef], supporting: Sequence[int] = ()) -> None:
        """Every passage given; those that support the answer's paragraphs (`supporting`) first, in bold."""
        if not sources:
            self.hide()
            return
        backing = [s for s in sources if s.n in supporting]
        others = [s for s in sources if s.n not in supporting]
        links = " · ".join(f"<b>{self._link(s)}</b>" for s in backing)
        if backing:
            text = f"Answer from: {links}" + (f" · also given: {' · '.join(map(self._link, others))}" if others else "")
        else:
            text = "Sources: " + " · ".join(map(self._link, sources))
        self.setText(text)
        self.show()

    @staticmethod
    def _link(s: SourceRef) -> str:
        return f'<a href="{CITE_SCHEME}:{s.n}">[{s.n}] {html.escape(label(s))}</a>'
