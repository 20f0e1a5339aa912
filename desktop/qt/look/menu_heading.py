"""A heading inside a menu ("Tools", "When the conversation is full").

`QMenu.addSection` draws its text only in some styles; in Fusion (Ember's) it is a bare
separator, so the menu opened on an empty row and its groups had no names. A heading here is
a label that cannot be chosen: arrow keys pass over it, as over a separator.
"""

from __future__ import annotations

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QLabel, QMenu, QWidgetAction


def add_heading(menu: QMenu, text: str) -> QAction:
    """A separator (unless first) and then `text`, muted and small, which cannot be chosen."""
    if not menu.isEmpty():
        menu.addSeparator()
    label = QLabel(text, menu)
    label.setObjectName("MenuHeading")
    action = QWidgetAction(menu)
    action.setDefaultWidget(label)
    action.setEnabled(False)  # not a choice: keys skip it, a click does nothing
    menu.addAction(action)
    return action
