"""Icons by role, from qtawesome's Phosphor set (an icon font: sharp at any scale, recoloured freely).

Widgets ask for a role ("send", "copy", ...) rather than a glyph name, so the set can change
in one place. Icons are drawn in the current palette's text or muted colour and sized with the text; `themed_icon`
caches them per (role, colour), so a theme switch costs one lookup per button.
"""

from __future__ import annotations

from functools import cache

from PySide6.QtCore import QSize
from PySide6.QtGui import QColor, QIcon
from PySide6.QtWidgets import QAbstractButton

from desktop.qt.look.theme import ICON_PX

DISABLED_ALPHA = 100
GLYPHS: dict[str, str] = {
    "send": "ph.paper-plane-right-fill",
    "stop": "ph.stop-fill",
    "copy": "ph.copy",
    "copied": "ph.check",
    "regenerate": "ph.arrow-clockwise",
    "details": "ph.info",
    "edit": "ph.pencil-simple",
    "new_chat": "ph.note-pencil",
    "settings": "ph.gear-six",
    "model": "ph.cpu",
    "search": "ph.magnifying-glass",
    "chevron_down": "ph.caret-down",
    "chevron_right": "ph.caret-right",
    "chevron_left": "ph.caret-left",
    "warning": "ph.warning",
    "error": "ph.warning-circle",
    "close": "ph.x",
    "menu": "ph.dots-three",
    "thinking": "ph.lightbulb",
    "format": "ph.brackets-curly",
    "keyboard": "ph.keyboard",
    "sparkle": "ph.sparkle",
    "theme": "ph.circle-half",
    "options": "ph.plus",
    "sidebar": "ph.list",
    "tool": "ph.wrench",
    "attach": "ph.paperclip",
}
_scale = 1.0  # the text size factor: icons grow and shrink with the text


@cache
def themed_icon(role: str, colour: str, disabled: str = "") -> QIcon:
    """The icon for `role` drawn in `colour` (#rrggbb), faded or in `disabled` when its button is disabled.

    An empty icon for an unknown role.
    """
    import qtawesome  # imported on first use: it loads its fonts into the running QApplication

    glyph = GLYPHS.get(role)
    if glyph is None:
        return QIcon()
    faded = QColor(disabled or colour)
    if not disabled:
        faded.setAlpha(DISABLED_ALPHA)
    return qtawesome.icon(glyph, color=QColor(colour), color_active=QColor(colour), color_disabled=faded)


def set_icon_scale(scale: float) -> None:
    """Icons follow the text size (Ctrl+= / Ctrl+-); `recolour` resizes the existing ones."""
    global _scale
    _scale = max(0.5, scale)


def scaled(px: int) -> int:
    return round(px * _scale)


def set_icon(button: QAbstractButton, role: str, colour: str, px: int = ICON_PX, disabled: str = "") -> None:
    button.setIcon(themed_icon(role, colour, disabled))
    button.setIconSize(QSize(scaled(px), scaled(px)))
    button.setProperty("iconRole", role)
    button.setProperty("iconPx", px)


def recolour(buttons: list[QAbstractButton], colour: str, accent_text: str) -> None:
    """After a theme switch: redraw every button's icon (its `iconRole`) in the new colours.

    Buttons marked `iconOnAccent` (Send) use the text colour on the accent instead (and the
    muted colour when disabled, as they then lose the accent fill).
    """
    for button in buttons:
        role = button.property("iconRole")
        if isinstance(role, str) and role:
            on_accent = bool(button.property("iconOnAccent"))
            button.setIcon(themed_icon(role, accent_text, colour) if on_accent else themed_icon(role, colour))
            px = button.property("iconPx")
            if isinstance(px, int):
                button.setIconSize(QSize(scaled(px), scaled(px)))
