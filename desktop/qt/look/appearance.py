"""Light/dark and text size: applied to the whole application, remembered between runs.

`ThemeManager` turns the design tokens (`desktop/qt/look/theme.py`) into a Qt palette, the
application font and the style sheet. It follows the system's colour scheme while the mode
is "system", and stores the user's choice and text size in `appearance.json` in the config
folder (a bad or missing file means the defaults).

Signals:
    changed(): the palette or the text size changed; widgets that draw their own colours
        (code highlighting, rendered Markdown, icons) refresh.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import cast

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QColor, QFont, QFontDatabase, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication

from desktop.qt.look.stylesheet import app_stylesheet
from desktop.qt.look.theme import LIGHT, MODES, TEXT_SCALES, Mode, Palette, blend, next_scale, palette_for
from engine.api.program import ember_paths, load_json_object, write_json_atomic

log = logging.getLogger(__name__)
FILE_NAME = "appearance.json"
CODE_FONT_RATIO = 0.95  # monospace reads larger than the proportional body font


@dataclass(frozen=True, slots=True)
class Appearance:
    mode: Mode = "system"
    text_scale: float = 1.0

    @classmethod
    def from_json(cls, data: dict[str, object]) -> Appearance:
        mode = data.get("mode")
        scale = data.get("text_scale")
        ok_scale = isinstance(scale, int | float) and TEXT_SCALES[0] <= float(scale) <= TEXT_SCALES[-1]
        return cls(cast(Mode, mode) if mode in MODES else "system", float(cast(float, scale)) if ok_scale else 1.0)

    def to_json(self) -> dict[str, object]:
        return {"mode": self.mode, "text_scale": self.text_scale}


def load_appearance() -> Appearance:
    return Appearance.from_json(load_json_object(ember_paths().config_dir / FILE_NAME, {}))


def save_appearance(appearance: Appearance) -> None:
    try:
        write_json_atomic(ember_paths().config_dir / FILE_NAME, appearance.to_json())
    except OSError as exc:  # a read-only config folder must not break the window
        log.warning("could not save the appearance: %s", exc)


def current_palette() -> Palette:
    """The running application's palette (light before any window applied one)."""
    current = ThemeManager.current()
    return current.palette if current is not None else LIGHT


def code_font() -> QFont:
    """The monospace font at the current text size."""
    current = ThemeManager.current()
    if current is not None:
        return current.code_font()
    return QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)


def system_is_dark() -> bool:
    hints = QGuiApplication.styleHints()
    return hints.colorScheme() == Qt.ColorScheme.Dark


class ThemeManager(QObject):
    """Applies and remembers the appearance of the running application."""

    changed = Signal()
    _current: ThemeManager | None = None

    def __init__(self, app: QApplication, appearance: Appearance | None = None) -> None:
        super().__init__(app)
        self._app = app
        self._appearance = appearance if appearance is not None else load_appearance()
        self._system_pt = QFontDatabase.systemFont(QFontDatabase.SystemFont.GeneralFont).pointSizeF()
        if self._system_pt <= 0:
            self._system_pt = 10.0
        self._palette = palette_for(self._appearance.mode, system_is_dark())
        QGuiApplication.styleHints().colorSchemeChanged.connect(self._on_system_scheme)
        ThemeManager._current = self
        self.apply()

    @classmethod
    def current(cls) -> ThemeManager | None:
        """The manager of the running application, if one was made."""
        current = cls._current
        app = QApplication.instance()
        return current if current is not None and app is not None and current.parent() is app else None

    @classmethod
    def for_app(cls) -> ThemeManager:
        """The manager of the running application (made on first use)."""
        app = QApplication.instance()
        assert isinstance(app, QApplication), "a QApplication must exist first"
        current = cls._current
        if current is None or current.parent() is not app:
            current = cls(app)
        return current

    # -- state -----------------------------------------------------------------------------

    @property
    def appearance(self) -> Appearance:
        return self._appearance

    @property
    def palette(self) -> Palette:
        return self._palette

    @property
    def body_pt(self) -> float:
        return round(self._system_pt * self._appearance.text_scale, 1)

    def code_font(self) -> QFont:
        font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        font.setPointSizeF(round(self.body_pt * CODE_FONT_RATIO, 1))
        return font

    # -- user actions ----------------------------------------------------------------------

    def set_mode(self, mode: Mode) -> None:
        self._set(replace(self._appearance, mode=mode))

    def toggle_dark(self) -> None:
        """Light <-> dark (leaving "system" for an explicit choice)."""
        self.set_mode("light" if self._palette.name == "dark" else "dark")

    def zoom(self, step: int) -> None:
        """Text one step larger (+1) or smaller (-1)."""
        self._set(replace(self._appearance, text_scale=next_scale(self._appearance.text_scale, step)))

    def reset_zoom(self) -> None:
        self._set(replace(self._appearance, text_scale=1.0))

    def _set(self, appearance: Appearance) -> None:
        if appearance == self._appearance:
            return
        self._appearance = appearance
        save_appearance(appearance)
        self._palette = palette_for(appearance.mode, system_is_dark())
        self.apply()

    def _on_system_scheme(self, _scheme: Qt.ColorScheme) -> None:
        if self._appearance.mode == "system":
            self._palette = palette_for("system", system_is_dark())
            self.apply()

    # -- applying --------------------------------------------------------------------------

    def apply(self) -> None:
        app = self._app
        if app.style().name().lower() != "fusion":
            app.setStyle("Fusion")  # draws with our palette the same on every platform
        app.setPalette(qt_palette(self._palette))
        font = app.font()
        font.setPointSizeF(self.body_pt)
        app.setFont(font)
        app.setStyleSheet(app_stylesheet(self._palette, self.body_pt))
        self.changed.emit()


def qt_palette(p: Palette) -> QPalette:
    """The Qt palette for widgets the style sheet does not reach (dialogs, menus, spin boxes)."""
    pal = QPalette()
    role = QPalette.ColorRole
    colours = {
        role.Window: p.window,
        role.WindowText: p.text,
        role.Base: p.surface,
        role.AlternateBase: p.surface_alt,
        role.Text: p.text,
        role.Button: p.surface,
        role.ButtonText: p.text,
        role.BrightText: p.accent_text,
        role.Highlight: p.accent,
        role.HighlightedText: p.accent_text,
        role.Link: p.link,
        role.LinkVisited: p.link,
        role.ToolTipBase: p.text,
        role.ToolTipText: p.surface,
        role.PlaceholderText: p.muted,
        role.Light: blend(p.surface, "#ffffff", 0.5),
        role.Midlight: p.surface_alt,
        role.Mid: p.border,
        role.Dark: blend(p.border, p.text, 0.3),
        role.Shadow: blend(p.border, "#000000", 0.6),
    }
    for r, colour in colours.items():
        pal.setColor(r, QColor(colour))
    disabled = QColor(blend(p.muted, p.surface, 0.4))
    for r in (role.WindowText, role.Text, role.ButtonText):
        pal.setColor(QPalette.ColorGroup.Disabled, r, disabled)
    return pal
