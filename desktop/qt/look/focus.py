"""Buttons take the keyboard focus from Tab, not from a mouse click.

A click that moves the focus onto a button leaves a focus ring on it and sends the next
keystrokes there (after Stop the focus sat on the token meter). Tab still reaches every
button, so keyboard users lose nothing; `tab_focus_only` is applied to the window and to
each message as it is added.

An expander in the transcript ("Thought for 3s", "Used calculator → 42") is clicked on the way
to typing the next message: `click_returns_focus` sends the focus back to the message box
after a mouse click (the press itself gives it to the transcript, before any handler runs).
A keyboard user who reached it with Tab keeps the focus on it.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractButton, QWidget

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
