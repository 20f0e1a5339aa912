"""Syntax colours for code blocks: Pygments lexes, a QSyntaxHighlighter paints.

Each line is lexed on its own. That keeps a streaming block cheap (only new lines are
highlighted) at the price of multi-line strings and comments being coloured line by line,
which reads fine for the short snippets a chat shows. A block without a known language
stays plain: guessing the language is slow and often wrong.

Loading a lexer imports its module, which can take 100 ms or more: long enough to stall a
streaming reply. So lexers load on a worker thread; a block shows plain text until its
lexer is there, then colours itself.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from functools import cache
from typing import TYPE_CHECKING, Any

from pygments.token import Comment, Keyword, Name, Number, Operator, String
from pygments.util import ClassNotFound
from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QColor, QFont, QSyntaxHighlighter, QTextCharFormat, QTextDocument

from desktop.qt.look.theme import Syntax

if TYPE_CHECKING:  # the lexers themselves load on the worker thread, not at start-up
    from pygments.lexer import Lexer

# Most specific first: Name.Builtin before Name, Keyword before everything.
_FAMILIES: tuple[tuple[Any, str], ...] = (
    (Comment, "comment"),
    (String, "string"),
    (Number, "number"),
    (Keyword, "keyword"),
    (Name.Builtin, "builtin"),
    (Name.Function, "function"),
    (Name.Class, "function"),
    (Name.Decorator, "function"),
    (Name.Exception, "builtin"),
    (Operator.Word, "keyword"),
)


_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ember-lexers")
_loads: dict[str, Future[Lexer | None]] = {}
_loads_lock = threading.Lock()


def load_lexer(lang: str) -> Future[Lexer | None]:
    """The lexer for `lang`, loading (once) on a worker thread."""
    key = lang.strip().lower()
    with _loads_lock:
        future = _loads.get(key)
        if future is None:
            future = _loads[key] = _pool.submit(lexer_for, key)
        return future


def ready_lexer(lang: str) -> Lexer | None:
    """The lexer for `lang` if it has loaded already (else None, and it starts loading)."""
    future = load_lexer(lang)
    return future.result() if future.done() else None


@cache
def lexer_for(lang: str) -> Lexer | None:
    """A Pygments lexer for a fence's language ("py", "python", "js", ...); None when unknown."""
    name = lang.strip().lower()
    if not name:
        return None
    from pygments.lexers import get_lexer_by_name  # the lexer table: imported here, on the worker thread

    try:
        return get_lexer_by_name(name, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


def _family(ttype: Any) -> str | None:
    for parent, family in _FAMILIES:
        if ttype in parent:
            return family
    return None


def char_formats(syntax: Syntax) -> dict[str, QTextCharFormat]:
    formats: dict[str, QTextCharFormat] = {}
    for family in ("keyword", "string", "comment", "number", "function", "builtin"):
        fmt = QTextCharFormat()
        fmt.setForeground(QColor(getattr(syntax, family)))
        if family == "comment":
            fmt.setFontItalic(True)
        if family == "keyword":
            fmt.setFontWeight(QFont.Weight.DemiBold)
        formats[family] = fmt
    return formats


class _Loaded(QObject):
    """Carries "the lexer for this language is loaded" from the worker to the GUI thread."""

    loaded = Signal(str)


class CodeHighlighter(QSyntaxHighlighter):
    """Highlights one code block's document in a language, in a palette's code colours."""

    def __init__(self, parent: QObject, syntax: Syntax, lang: str = "") -> None:
        super().__init__(parent)  # not on a document yet: `attach` it once its text settles
        self._notice = _Loaded(self)
        self._notice.loaded.connect(self._on_loaded)  # queued: emitted on the worker thread
        self._lang = ""
        self._lexer: Lexer | None = None
        self._formats = char_formats(syntax)
        self.set_language(lang)

    @property
    def active(self) -> bool:
        return self._lexer is not None

    @property
    def attached(self) -> bool:
        return self.document() is not None

    def attach(self, document: QTextDocument) -> None:
        """Colour `document` (all of it, once) and keep it coloured."""
        if self.document() is not document:
            self.setDocument(document)

    def detach(self) -> None:
        """Stop colouring (while the text streams: re-lexing every few milliseconds is wasted work)."""
        if self.document() is not None:
            self.setDocument(None)  # pyright: ignore[reportArgumentType]

    def set_language(self, lang: str) -> None:
        if lang == self._lang:
            return
        self._lang = lang
        self._lexer = ready_lexer(lang) if lang.strip() else None
        if self._lexer is not None and self.attached:
            self.rehighlight()
        elif lang.strip():
            load_lexer(lang).add_done_callback(lambda _f, lang=lang: self._announce(lang))

    def _announce(self, lang: str) -> None:
        try:
            self._notice.loaded.emit(lang)
        except RuntimeError:
            pass  # the code block went away while its lexer loaded

    def _on_loaded(self, lang: str) -> None:
        if lang == self._lang and self._lexer is None:
            self._lexer = ready_lexer(lang)
            if self._lexer is not None and self.attached:
                self.rehighlight()

    def set_syntax(self, syntax: Syntax) -> None:
        self._formats = char_formats(syntax)
        if self._lexer is not None and self.attached:
            self.rehighlight()

    def highlightBlock(self, text: str) -> None:
        if self._lexer is None or not text:
            return
        pos = 0
        for ttype, value in self._lexer.get_tokens(text):
            family = _family(ttype)
            if family is not None:
                self.setFormat(pos, len(value), self._formats[family])
            pos += len(value)
