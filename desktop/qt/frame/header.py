"""The window's header: the sidebar switch, the model chip, the conversation's title, two actions.

Left: the sidebar switch and the model chip (opens the picker; while another model loads,
the chip keeps naming the one still answering and a thin bar with "Loading <name>…" sits
beside it). Middle: the open conversation's title, elided at its end. Right: the window's
menu (model settings, appearance, keyboard shortcuts, quit) and New chat, each an icon
button with a tooltip and an accessible name. The conversation's own settings (reply
format, tools) live in the composer's options menu, so the header stays calm at any width.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QAction, QActionGroup, QKeySequence, QResizeEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QMenu,
    QProgressBar,
    QSizePolicy,
    QToolButton,
    QWidget,
)

from desktop.qt.look.icons import scaled, set_icon
from desktop.qt.look.menu_place import keep_inside
from desktop.qt.look.theme import SPACE_SM, Mode

NEW_TITLE = "New chat"
LOADING_MAX_WIDTH = 220
MODE_LABELS: dict[Mode, str] = {"system": "Follow the system", "light": "Light", "dark": "Dark"}


def icon_button(parent: QWidget, name: str, role: str, accessible: str, tip: str) -> QToolButton:
    """A square icon-only button with a tooltip and an accessible name."""
    button = QToolButton(parent)
    button.setObjectName(name)
    button.setAccessibleName(accessible)
    button.setToolTip(tip)
    button.setText(accessible)  # read by screen readers and shown if icons fail to load
    button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonIconOnly)
    button.setAutoRaise(True)
    button.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
    button.setCursor(Qt.CursorShape.PointingHandCursor)
    set_icon(button, role, "#5c5c66")  # recoloured by the window once the theme is known
    return button


class ElidedLabel(QLabel):
    """One line, elided at the right to whatever width it gets; the whole text is its tooltip."""

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._full = ""
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.set_full_text(text)

    def full_text(self) -> str:
        return self._full

    def set_full_text(self, text: str) -> None:
        self._full = text
        self.setToolTip(text)
        self.updateGeometry()
        self._elide()

    def sizeHint(self) -> QSize:
        # As wide as the whole text (layouts shrink it, and then it elides), not the elided one.
        hint = super().sizeHint()
        margins = self.contentsMargins()
        return QSize(
            self.fontMetrics().horizontalAdvance(self._full) + margins.left() + margins.right() + 4, hint.height()
        )

    def minimumSizeHint(self) -> QSize:
        return QSize(0, super().minimumSizeHint().height())

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        # Elided to the room it really has (never wider, which would clip its first letters);
        # too narrow for even one letter and an ellipsis, it shows nothing.
        room = self.contentsRect().width()
        text = self.fontMetrics().elidedText(self._full, Qt.TextElideMode.ElideRight, max(0, room))
        self.setText(text if len(text) > 1 or text == self._full else "")


class HeaderBar(QFrame):
    """Sidebar switch, model chip, loading indicator, title, the window's menu, New chat."""

    MODEL_BUTTON_MAX_WIDTH = 320
    NO_MODEL = "No model"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("HeaderBar")
        self.model_button = self._make_chip()
        self.loading_bar = QProgressBar(self)
        self.loading_bar.setObjectName("LoadingBar")
        self.loading_bar.setRange(0, 0)  # indeterminate: llama.cpp reports no load progress
        self.loading_bar.setTextVisible(False)
        self.loading_bar.setAccessibleName("Model loading progress")
        self.loading_bar.setFixedSize(64, 4)
        self.loading_label = ElidedLabel("", self)
        self.loading_label.setObjectName("Muted")
        self.loading_label.setMaximumWidth(LOADING_MAX_WIDTH)
        self.loading_label.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        self.loading_label.setAccessibleName("Model loading")
        self.title = ElidedLabel(NEW_TITLE, self)
        self.title.setObjectName("HeaderTitle")
        self.title.setAccessibleName("Conversation title")
        self.title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.sidebar_button = icon_button(self, "IconButton", "sidebar", "Sidebar", "Show or hide the sidebar (Ctrl+B)")
        self.sidebar_button.setCheckable(True)
        self.sidebar_button.setChecked(True)
        self.menu_button = icon_button(
            self, "IconButton", "menu", "Menu", "Model settings, appearance, keyboard shortcuts"
        )
        self.menu_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.menu = QMenu(self.menu_button)
        self.menu.setObjectName("WindowMenu")
        self.menu_button.setMenu(self.menu)
        keep_inside(self.menu, self.menu_button, upward=False)  # right-aligned inside the window
        self.settings_action = self.menu.addAction("Model settings…")
        self.settings_action.setShortcut(QKeySequence("Ctrl+,"))
        self.settings_action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        self.appearance_menu = self.menu.addMenu("Appearance")
        self.menu.addSeparator()
        self.shortcuts_action = self.menu.addAction("Keyboard shortcuts")
        self.shortcuts_action.setShortcuts([QKeySequence("Ctrl+/"), QKeySequence("F1")])
        self.shortcuts_action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        self.quit_action = self.menu.addAction("Quit")
        self.quit_action.setShortcut(QKeySequence("Ctrl+Q"))
        self.quit_action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        for action in (self.settings_action, self.shortcuts_action, self.quit_action):
            self.addAction(action)  # their shortcuts work while the menu is closed
        self.new_chat = icon_button(self, "NewChatButton", "new_chat", "New conversation", "New conversation (Ctrl+N)")
        self.mode_actions: dict[Mode, QAction] = {}
        self._label = self.NO_MODEL
        self._lay_out()
        self.show_model(self.NO_MODEL)

    def _make_chip(self) -> QToolButton:
        chip = QToolButton(self)
        chip.setObjectName("ModelButton")
        chip.setAccessibleName("Model")
        chip.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        chip.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        chip.setCursor(Qt.CursorShape.PointingHandCursor)
        chip.setMaximumWidth(self.MODEL_BUTTON_MAX_WIDTH)
        chip.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        set_icon(chip, "model", "#5c5c66", 16)
        return chip

    def _lay_out(self) -> None:
        layout = QHBoxLayout(self)
        layout.setContentsMargins(SPACE_SM, SPACE_SM, SPACE_SM, SPACE_SM)
        layout.setSpacing(SPACE_SM)
        layout.addWidget(self.sidebar_button)
        layout.addWidget(self.model_button)
        layout.addWidget(self.loading_bar)
        layout.addWidget(self.loading_label)
        layout.addWidget(self.title, 1)
        layout.addWidget(self.menu_button)
        layout.addWidget(self.new_chat)

    def set_appearance_menu(self, modes: QActionGroup, actions: dict[Mode, QAction]) -> None:
        self.mode_actions = actions
        self._mode_group = modes

    # -- model -----------------------------------------------------------------------------

    @property
    def model_label(self) -> str:
        return self._label

    def show_model(self, label: str) -> None:
        """Name the model answering now; ends any loading indication."""
        self._label = label
        self._fit_chip()
        self.model_button.setToolTip(f"{label}\nChoose a model (Ctrl+M)")
        self.model_button.setAccessibleDescription(f"{label}. Opens the model picker")
        self.hide_loading()

    def _fit_chip(self) -> None:
        """The model's name, elided in the middle (file names differ at their ends) to the chip's room."""
        metrics = self.model_button.fontMetrics()
        # The chip gets at most two fifths of the header, never more than its cap: a third
        # elided the built-in model's name at the default size with the header half empty.
        # The cap grows with the text size: at the largest text the built-in model's name was cut
        # with 300 px of the header empty.
        cap = scaled(self.MODEL_BUTTON_MAX_WIDTH)
        self.model_button.setMaximumWidth(cap)
        room = min(cap, max(120, self.width() * 2 // 5))
        icon = self.model_button.iconSize().width()
        text_room = max(40, room - icon - 48)
        shown = metrics.elidedText(self._label, Qt.TextElideMode.ElideMiddle, text_room)
        self.model_button.setText(f"{shown}  ▾")

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit_chip()

    def refit(self) -> None:
        """The text size changed: measure again."""
        self._fit_chip()
        self.title.set_full_text(self.title.full_text())

    def show_loading(self, label: str) -> None:
        self.loading_label.set_full_text(f"Loading {label}…")
        self.loading_bar.show()
        self.loading_label.show()

    def hide_loading(self) -> None:
        self.loading_bar.hide()
        self.loading_label.hide()

    @property
    def loading(self) -> bool:
        return not self.loading_label.isHidden()

    # -- conversation ----------------------------------------------------------------------

    def show_title(self, title: str) -> None:
        self.title.set_full_text(title.strip() or NEW_TITLE)
