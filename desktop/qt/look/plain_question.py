"""A question with plain buttons that say what they do ("Allow" / "Not now", "Delete" / "Cancel").

No stock "?" icon and no Yes/No: the buttons carry the verb, so the answer reads without the
question. The safe choice is the default (Enter and Esc both take it).
"""

from __future__ import annotations

from PySide6.QtWidgets import QMessageBox, QWidget


def ask(parent: QWidget | None, title: str, text: str, do: str, safe: str, *, destructive: bool = False) -> QMessageBox:
    """The question as a box, not shown yet (`answered` runs it)."""
    box = QMessageBox(QMessageBox.Icon.NoIcon, title, text, parent=parent)
    role = QMessageBox.ButtonRole.DestructiveRole if destructive else QMessageBox.ButtonRole.AcceptRole
    box.setProperty("do", box.addButton(do, role))
    keep = box.addButton(safe, QMessageBox.ButtonRole.RejectRole)
    box.setDefaultButton(keep)
    box.setEscapeButton(keep)
    return box


def answered(box: QMessageBox) -> bool:
    """Run `box` (from `ask`); True when its action button was chosen."""
    box.exec()
    return box.clickedButton() is box.property("do")
