"""The picker's offer to make a faster copy of a slow-format file (issue #41), in the details pane."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from pytestqt.qtbot import QtBot

from desktop.core.model_rows import entry_row
from desktop.qt.models.fast_copy_offer import result_text
from desktop.qt.models.model_details import ModelDetails
from models.gguf.meta import read_metadata
from models.library.default_model import shipped_model_path
from models.library.scan import LibraryEntry, Source


def _row(path: Path, source: Source = Source.RECENT):  # type: ignore[no-untyped-def]
    meta = read_metadata(path)
    return entry_row(LibraryEntry(path, source, path.stat().st_size, 1, meta))


def test_a_slow_format_file_gets_the_offer_and_a_fast_one_does_not(qtbot: QtBot, tmp_path: Path) -> None:
    details = ModelDetails()
    qtbot.addWidget(details)
    details.show()
    slow = tmp_path / "user.Q4_1.gguf"
    shutil.copyfile(shipped_model_path(), slow)  # the built-in file, as a user's own Q4_1
    details.show_row(_row(slow))
    assert details.offer.isVisible()
    assert details.offer.label.text().startswith("This file's format is slow on this CPU: make a faster copy (about ")
    assert details.offer.label.text().endswith(" MB, same quality)")
    details.show_row(_row(shipped_model_path(), Source.BUILTIN))  # converted by Ember itself, never offered
    assert not details.offer.isVisible()
    details.show_row(None)
    assert not details.offer.isVisible()


def test_the_childs_answer_is_one_line_for_the_user() -> None:
    done = json.dumps({"path": "/m/user.Q8_0.gguf", "reason": "Q8_0 kept: same quality, prompt x1.40, decode x1.01"})
    assert result_text(done, "") == (
        "Written: user.Q8_0.gguf (Q8_0 kept: same quality, prompt x1.40, decode x1.01). Add it with Add file…"
    )
    kept = json.dumps({"path": None, "reason": "no copy kept: every faster format loses quality"})
    assert result_text(kept, "") == "No copy made: no copy kept: every faster format loses quality"
    assert result_text(None, "already Q4_0") == "No copy made: already Q4_0"
    assert result_text("not json", "boom") == "No copy made: boom"
