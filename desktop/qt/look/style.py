"""Tints derived from the current Qt palette (for widgets that paint their own rows).

The window's look (style sheet, palettes, type scale) lives in `desktop/qt/look/theme.py` and
`desktop/qt/look/stylesheet.py`; `desktop/qt/look/appearance.py` sets the Qt palette these read.
"""

from __future__ import annotations

from PySide6.QtGui import QColor, QFont, QFontDatabase, QPalette
from PySide6.QtWidgets import QWidget

CONTENT_MAX_WIDTH = 860  # a readable line length for the conversation column
SPACING = 12


def mix(a: QColor, b: QColor, t: float) -> QColor:
    """`a` moved a fraction `t` of the way towards `b`."""
    return QColor(
        round(a.red() + (b.red() - a.red()) * t),
        round(a.green() + (b.green() - a.green()) * t),
        round(a.blue() + (b.blue() - a.blue()) * t),
    )


def _role(palette: QPalette, role: QPalette.ColorRole) -> QColor:
    return palette.color(QPalette.ColorGroup.Active, role)


def muted_text(palette: QPalette) -> QColor:
    return mix(_role(palette, QPalette.ColorRole.WindowText), _role(palette, QPalette.ColorRole.Window), 0.45)


def subtle_fill(palette: QPalette, amount: float = 0.06) -> QColor:
    return mix(_role(palette, QPalette.ColorRole.Base), _role(palette, QPalette.ColorRole.Text), amount)


def border(palette: QPalette) -> QColor:
    return mix(_role(palette, QPalette.ColorRole.Window), _role(palette, QPalette.ColorRole.WindowText), 0.18)


def accent_fill(palette: QPalette) -> QColor:
    return mix(_role(palette, QPalette.ColorRole.Base), _role(palette, QPalette.ColorRole.Highlight), 0.16)


def warning_fill(palette: QPalette) -> QColor:
    return mix(_role(palette, QPalette.ColorRole.Base), QColor(220, 120, 0), 0.16)


def warning_border(palette: QPalette) -> QColor:
    return mix(_role(palette, QPalette.ColorRole.Base), QColor(220, 120, 0), 0.55)


def monospace_font() -> QFont:
    return QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)


def fit_to_window(dialog: QWidget, size: tuple[int, int], least: tuple[int, int]) -> None:
    """`dialog` at `size`: as big as it is useful, never bigger than the window it belongs to
    (down to `least`)."""
    width, height = size
    parent = dialog.parentWidget()
    if parent is not None:
        window = parent.window()
        width = min(width, max(least[0], window.width() - 48))
        height = min(height, max(least[1], window.height() - 48))
    dialog.resize(width, height)
