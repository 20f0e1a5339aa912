"""Syntax colours for code blocks: Pygments lexes, a QSyntaxHighlighter paints.

Each line is lexed on its own. That keeps a streaming block cheap (only new lines are
highlighted) at the price of multi-line strings and comments being coloured line by line,
which reads fine for the short snippets a chat shows. A block without a known language
stays plain: guessing the language is slow and often wrong.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.token import Comment, Keyword, Name, Number, Operator, String
from pygments.util import ClassNotFound
from PySide6.QtGui import QColor, QFont, QSyntaxHighlighter, QTextCharFormat, QTextDocument

from desktop.qt.theme import Syntax

# Most specific first: Name.Builtin before Name, Keyword before everything.
_FAMILIES: tuple[tuple[Any, str], ...] = (
    (Comment, "comment"), (String, "string"), (Number, "number"), (Keyword, "keyword"),
    (Name.Builtin, "builtin"), (Name.Function, "function"), (Name.Class, "function"),
    (Name.Decorator, "function"), (Name.Exception, "builtin"), (Operator.Word, "keyword"),
)


@cache
def lexer_for(lang: str) -> Lexer | None:
    """A Pygments lexer for a fence's language ("py", "python", "js", ...); None when unknown."""
    name = lang.strip().lower()
    if not name:
        return None
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


class CodeHighlighter(QSyntaxHighlighter):
    """Highlights one code block's document in a language, in a palette's code colours."""

    def __init__(self, document: QTextDocument, syntax: Syntax, lang: str = "") -> None:
        super().__init__(document)
        self._lexer = lexer_for(lang)
        self._lang = lang
        self._formats = char_formats(syntax)

    @property
    def active(self) -> bool:
        return self._lexer is not None

    def set_language(self, lang: str) -> None:
        if lang != self._lang:
            self._lang = lang
            self._lexer = lexer_for(lang)
            self.rehighlight()

    def set_syntax(self, syntax: Syntax) -> None:
        self._formats = char_formats(syntax)
        if self._lexer is not None:
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
