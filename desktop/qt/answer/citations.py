"""A reply's sources in the window: `[n]` links whose hover shows the passage and whose click opens it.

`CitationActions` is shared by the answer's text (its `[n]` links) and the reply's sources row:
hovering a reference shows the passage (file, page, text) in a tooltip; clicking opens the file
in the system's viewer (a PDF at its page, for viewers that take a `#page=` fragment), and
where no application opens it, shows the passage with "Show in folder". The row lists every
passage the prompt carried, so the sources are one click away even when the model cites none:
"Answer from: **[2] …** · also given: [1] …" when passages support the answer's paragraphs, and
when none does, the same passages headed as what the model was given (`GIVEN_ONLY`).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtCore import QPoint, Qt, QUrl
from PySide6.QtGui import QCursor, QDesktopServices
from PySide6.QtWidgets import QLabel, QMessageBox, QToolTip, QWidget

from desktop.core.citations import CITE_SCHEME
from engine.api.documents import label
from engine.api.text import escaped as shown
from engine.api.values import ANSWER_FROM_PARAGRAPHS, AnswerFrom, SourceRef

TOOLTIP_CHARS = 700
FIRST_WORDS = 4  # of a passage, beside a file cited more than once
# The row when no paragraph of a whole answer cites or matches a passage: what it was given, said as that.
GIVEN_ONLY = "Given to the model (no paragraph of the answer matches one closely)"

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


def first_words(ref: SourceRef, count: int = FIRST_WORDS) -> str:
    """The passage's first words, “Grant of licence…”: how a reader tells two passages of one file apart."""
    words = ref.text.split()
    return " ".join(words[:count]) + ("…" if len(words) > count else "")


def passage_tooltip(ref: SourceRef) -> str:
    text = " ".join(ref.text.split())
    if len(text) > TOOLTIP_CHARS:
        text = text[:TOOLTIP_CHARS] + "…"
    where = html.escape(shown(ref.path))  # the passage itself follows: no character offsets
    return f"<p><b>[{ref.n}] {html.escape(label(ref))}</b><br><small>{where}</small></p><p>{html.escape(text)}</p>"


def source_labels(sources: Sequence[SourceRef]) -> list[str]:
    """Each source's label; a file cited more than once adds its passage's first words, so the row
    never reads "[1] MPL-2.0 · [2] MPL-2.0 · [3] MPL-2.0"."""
    labels = [label(s) for s in sources]
    repeated = {name for name in labels if labels.count(name) > 1}
    return [f"{name} “{first_words(s)}”" if name in repeated else name for s, name in zip(sources, labels, strict=True)]


def cite_number(url: QUrl | str) -> int | None:
    """n for a `cite:n` link, else None."""
    text = url.toString() if isinstance(url, QUrl) else url
    scheme, _, rest = text.partition(":")
    return int(rest) if scheme == CITE_SCHEME and rest.isascii() and rest.isdigit() else None  # int("²") raises


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

    def open(self, n: int | None, parent: QWidget | None = None) -> bool:
        """Open the cited file; when no application opens it, say so with the passage and "Show in folder"."""
        ref = self.sources.get(n) if n is not None else None
        if ref is None or not Path(ref.path).exists():
            return False
        if _opener(source_url(ref)):
            return True
        self.no_application(ref, parent)
        return False

    def no_application(self, ref: SourceRef, parent: QWidget | None) -> QMessageBox:
        """No application opens this kind of file here: the passage itself, and the file's folder a click away."""
        box = QMessageBox(
            QMessageBox.Icon.NoIcon,
            f"[{ref.n}] {label(ref)}",
            f"No application on this computer opens {shown(Path(ref.path).name)}. The passage the answer cites:",
            parent=parent.window() if parent is not None else None,
        )
        box.setInformativeText(" ".join(ref.text.split())[: TOOLTIP_CHARS * 2])
        box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        folder = box.addButton("Show in folder", QMessageBox.ButtonRole.ActionRole)
        box.addButton(QMessageBox.StandardButton.Close)
        folder.clicked.connect(lambda: _opener(QUrl.fromLocalFile(str(Path(ref.path).parent))))
        box.setObjectName("CitationNoApp")
        box.open()
        return box


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
        self.linkActivated.connect(lambda link: self.citations.open(cite_number(link), self))
        self.hide()

    def show_sources(self, sources: Sequence[SourceRef], origin: AnswerFrom | None = None) -> None:
        """Every passage given, saying what the answer came from once it is whole (`origin`): those that
        support its paragraphs first, in bold; when none does, the passages labelled as what the
        model was given (never as support)."""
        if not sources:
            self.hide()
            return
        names = dict(zip((s.n for s in sources), source_labels(sources), strict=True))
        supporting = origin.sources if origin is not None and origin.basis == ANSWER_FROM_PARAGRAPHS else ()
        backing = [s for s in sources if s.n in supporting]
        others = [s for s in sources if s.n not in supporting]
        every = " · ".join(self._link(s, names[s.n]) for s in sources)
        if backing:
            links = " · ".join(f"<b>{self._link(s, names[s.n])}</b>" for s in backing)
            also = " · ".join(self._link(s, names[s.n]) for s in others)
            text = f"Answer from: {links}" + (f" · also given: {also}" if others else "")
        elif origin is not None:
            text = f"{GIVEN_ONLY}: {every}"
        else:
            text = f"Sources: {every}"  # the answer is not whole yet (or was stored before attribution)
        self.setText(text)
        self.show()

    @staticmethod
    def _link(s: SourceRef, name: str) -> str:
        return f'<a href="{CITE_SCHEME}:{s.n}">[{s.n}] {html.escape(name)}</a>'
