"""The window's header: the model chip, the conversation's title and settings, window actions.

Left: the model chip (opens the picker; while another model loads, the chip keeps naming
the one still answering and a thin bar with "Loading <name>…" sits beside it). Middle: the
open conversation's title. Right: the conversation's settings (the reply format lives
there, `add_conversation_tool`), the model's settings, appearance (theme, text size) and
New chat, each an icon button with a tooltip and an accessible name.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QAction, QActionGroup, QResizeEvent
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

from desktop.qt.icons import set_icon
from desktop.qt.theme import SPACE_LG, SPACE_SM, Mode

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
        return QSize(self.fontMetrics().horizontalAdvance(self._full) + margins.left() + margins.right() + 4,
                     hint.height())

    def minimumSizeHint(self) -> QSize:
        return QSize(40, super().minimumSizeHint().height())

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        self.setText(self.fontMetrics().elidedText(self._full, Qt.TextElideMode.ElideRight, max(40, self.width())))


class HeaderBar(QFrame):
    """Model chip, loading indicator, title, conversation settings, model settings, appearance, New chat."""

    MODEL_BUTTON_MAX_WIDTH = 360
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
        self.settings_button = icon_button(self, "ModelSettingsButton", "settings", "Model settings",
                                           "Settings for the current model")
        self.appearance_button = icon_button(self, "AppearanceButton", "theme", "Appearance",
                                             "Theme and text size")
        self.appearance_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.new_chat = icon_button(self, "NewChatButton", "new_chat", "New conversation", "New conversation (Ctrl+N)")
        self.mode_actions: dict[Mode, QAction] = {}
        self._label = self.NO_MODEL
        self._tools = QHBoxLayout()
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
        set_icon(chip, "model", "#5c5c66", 16)
        return chip

    def _lay_out(self) -> None:
        layout = QHBoxLayout(self)
        layout.setContentsMargins(SPACE_LG, SPACE_SM, SPACE_SM, SPACE_SM)
        layout.setSpacing(SPACE_SM)
        layout.addWidget(self.model_button)
        layout.addWidget(self.loading_bar)
        layout.addWidget(self.loading_label)
        layout.addWidget(self.title, 1)
        self._tools.setSpacing(2)
        layout.addLayout(self._tools)
        layout.addWidget(self.settings_button)
        layout.addWidget(self.appearance_button)
        layout.addWidget(self.new_chat)

    def add_conversation_tool(self, widget: QWidget) -> None:
        """A control of the open conversation's settings (e.g. the reply format), left of the window actions."""
        widget.setParent(self)
        self._tools.addWidget(widget)

    def set_appearance_menu(self, menu: QMenu, modes: QActionGroup, actions: dict[Mode, QAction]) -> None:
        self.appearance_button.setMenu(menu)
        self.mode_actions = actions
        self._mode_group = modes

    # -- model -----------------------------------------------------------------------------

    @property
    def model_label(self) -> str:
        return self._label

    def show_model(self, label: str) -> None:
        """Name the model answering now; ends any loading indication."""
        self._label = label
        metrics = self.model_button.fontMetrics()
        shown = metrics.elidedText(label, Qt.TextElideMode.ElideMiddle, self.MODEL_BUTTON_MAX_WIDTH - 64)
        self.model_button.setText(f"{shown}  ▾")
        self.model_button.setToolTip(f"{label}\nChoose a model (Ctrl+M)")
        self.model_button.setAccessibleDescription(f"{label}. Opens the model picker")
        self.hide_loading()

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
