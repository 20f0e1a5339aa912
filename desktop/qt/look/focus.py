"""Buttons take the keyboard focus from Tab, not from a mouse click.

A click that moves the focus onto a button leaves a focus ring on it and sends the next
keystrokes there (after Stop the focus sat on the token meter). Tab still reaches every
button, so keyboard users lose nothing; `tab_focus_only` is applied to the window and to
each message as it is added.

An expander in the transcript ("Thought for 3s", "Used calculator → 42") is clicked on the way
to typing the next message: `click_returns_focus` sends the focus back to the message box
after a mouse click (the press itself gives it to the transcript, before any handler runs).
A keyboard user who reached it with Tab keeps the focus on it.

Wherever else the focus was left (a "↓ latest" that went away, a closed dialog, the chat list
after opening a chat), `TypingGoesToTheBox` sends the first printable key to the message box.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QLineEdit,
    QPlainTextEdit,
    QTextEdit,
    QWidget,
)

MESSAGE_BOX = "ComposerEdit"  # the object name of the box where the next message is typed


def tab_focus_only(root: QWidget) -> None:
    """Every button under `root` (and `root` itself) focusable by Tab only."""
    buttons = root.findChildren(QAbstractButton)
    if isinstance(root, QAbstractButton):
        buttons.append(root)
    for button in buttons:
        if button.focusPolicy() & Qt.FocusPolicy.ClickFocus:
            button.setFocusPolicy(Qt.FocusPolicy.TabFocus)


def click_returns_focus(button: QAbstractButton) -> None:
    """After a mouse click on `button`, the keyboard focus goes back to the window's message box."""
    button.setFocusPolicy(Qt.FocusPolicy.TabFocus)

    def back() -> None:
        if button.hasFocus():  # reached by Tab and pressed with Space: the keyboard user stays here
            return
        box = button.window().findChild(QWidget, MESSAGE_BOX)
        if box is not None and box.isVisible() and box.isEnabled():
            box.setFocus(Qt.FocusReason.OtherFocusReason)

    button.clicked.connect(back)


def focus_the_box(widget: QWidget) -> None:
    """Give the message box of `widget`'s window the keyboard focus (a dialog over it closed, a
    button that had it went away), unless the user is typing in another field meanwhile."""
    window = widget.window()
    box = window.findChild(QWidget, MESSAGE_BOX)
    focused = QApplication.focusWidget()
    if box is None or not box.isVisible() or not box.isEnabled():
        return
    if focused is not None and focused is not box and (focused.window() is not window or typing_here(focused)):
        return
    box.setFocus(Qt.FocusReason.OtherFocusReason)


def typing_here(widget: QWidget) -> bool:
    """A field the user types into (its keys are its own), or a tool card waiting for Y/A/N."""
    if isinstance(widget, QLineEdit | QAbstractSpinBox) or (isinstance(widget, QComboBox) and widget.isEditable()):
        return True
    if isinstance(widget, QPlainTextEdit | QTextEdit) and not widget.isReadOnly():
        return True
    parent: QWidget | None = widget
    while parent is not None:
        if parent.objectName() == "ToolCallCard" and parent.property("asking"):
            return True
        parent = parent.parentWidget()
    return False


class TypingGoesToTheBox(QObject):
    """Type-to-focus: a printable key pressed in `window` where nothing is typed (a button, the
    chat list, the transcript) moves the focus to the message box and is typed there, as in
    ChatGPT. Keys with Ctrl or Alt, Space (it presses a focused button) and the keys of a tool
    card that asks keep their meaning."""

    def __init__(self, window: QWidget) -> None:
        super().__init__(window)
        self._window = window
        app = QApplication.instance()
        if app is not None:
            app.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() != QEvent.Type.KeyPress or not isinstance(event, QKeyEvent):
            return False
        focused = QApplication.focusWidget()
        if focused is None or watched is not focused or focused.window() is not self._window:
            return False
        box = self._window.findChild(QWidget, MESSAGE_BOX)
        if box is None or focused is box or not _printable(event) or typing_here(focused):
            return False
        if not box.isVisible() or not box.isEnabled():
            return False
        box.setFocus(Qt.FocusReason.OtherFocusReason)
        copy = QKeyEvent(event.type(), event.key(), event.modifiers(), event.text(), event.isAutoRepeat())
        QApplication.sendEvent(box, copy)
        return True


def _printable(event: QKeyEvent) -> bool:
    if event.modifiers() & (Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.AltModifier):
        return False
    text = event.text()
    return bool(text) and text.isprintable() and not text.isspace()
