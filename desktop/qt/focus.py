"""Buttons take the keyboard focus from Tab, not from a mouse click.

A click that moves the focus onto a button leaves a focus ring on it and sends the next
keystrokes there (after Stop the focus sat on the token meter). Tab still reaches every
button, so keyboard users lose nothing; `tab_focus_only` is applied to the window and to
each message as it is added.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractButton, QWidget


def tab_focus_only(root: QWidget) -> None:
    """Every button under `root` (and `root` itself) focusable by Tab only."""
    buttons = root.findChildren(QAbstractButton)
    if isinstance(root, QAbstractButton):
        buttons.append(root)
    for button in buttons:
        if button.focusPolicy() & Qt.FocusPolicy.ClickFocus:
            button.setFocusPolicy(Qt.FocusPolicy.TabFocus)
