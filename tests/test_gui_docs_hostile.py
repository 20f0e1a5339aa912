"""The Collections dialog and the window with hostile documents: it never spins for ever, Cancel
always works, names show escaped, and a reply's stored sources are bounded.

Cases from the adversarial review: DC-27 a file name that is not UTF-8 killed the dialog's worker
(spinner for ever, Cancel and Re-index dead); DC-34 a FIFO in the folder blocked the worker and
Cancel did nothing; DC-22 newlines and bidi overrides in names reached labels; IM-09 an imported
reply with 20,000 sources stalled the window 3.9 s when its conversation was opened.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from doc_fixtures import write_pdf
from gui_helpers import WAIT_MS, Chat

from desktop.core.citations import MAX_STORED_SOURCES
from desktop.qt.chat import documents_ui
from desktop.qt.chat.documents_ui import CollectionsDialog
from engine.backends.scripted import ScriptedBackend
from engine.docs.indexer import IndexReport, Progress

pytest_plugins = ["gui_helpers"]
MakeChat = Callable[..., Chat]
posix_only = pytest.mark.skipif(sys.platform == "win32", reason="FIFOs and byte names are POSIX")


def _dialog(chat: Chat, tmp_path: Path) -> CollectionsDialog:
    dialog = chat.window.documents_button.open_collections()
    chat.qtbot.addWidget(dialog)
    return dialog


@pytest.mark.slow  # the real default embedder
@posix_only
def test_a_name_that_is_not_utf8_and_a_fifo_do_not_stop_the_dialog(make_chat: MakeChat, tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "new.txt").write_text("new file zeta")
    (folder / os.fsdecode(b"bad\xff\xfeutf8.txt")).write_text("delta four")  # DC-27
    os.mkfifo(folder / "pipe.txt")  # DC-34
    chat = make_chat(backend=ScriptedBackend.from_texts("ok"))
    dialog = _dialog(chat, tmp_path)
    dialog.create_collection("Mixed")
    dialog.add_paths([folder])
    chat.qtbot.waitUntil(lambda: dialog.worker is None, timeout=WAIT_MS * 4)
    assert dialog.detail.text().splitlines()[:2] == [
        "2 indexed, 0 unchanged, 1 left out",  # every file left out is counted, then named with why
        "pipe.txt: is a pipe (FIFO), not a regular file; skipped",
    ]
    assert not dialog.progress.isVisible() and dialog.buttons["reindex"].isEnabled()


@pytest.mark.slow  # the real default embedder
def test_an_unexpected_error_in_the_worker_ends_in_one_line(
    make_chat: MakeChat, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DC-27's shape: any exception, not only Ember's own, ends the job; the dialog never spins on."""

    def broken(*args: object, **kwargs: object) -> IndexReport:
        raise UnicodeEncodeError("utf-8", "bad\udcff", 3, 4, "surrogates not allowed")

    monkeypatch.setattr(documents_ui, "index_collection", broken)
    chat = make_chat(backend=ScriptedBackend.from_texts("ok"))
    dialog = _dialog(chat, tmp_path)
    dialog.create_collection("C")
    dialog.add_paths([tmp_path])
    chat.qtbot.waitUntil(lambda: dialog.worker is None, timeout=WAIT_MS)
    assert dialog.detail.text().startswith("indexing stopped: ") and "\n" not in dialog.detail.text()
    assert not dialog.progress.isVisible() and dialog.buttons["reindex"].isEnabled()


class SlowEmbedder:
    """An embedding model that takes a while per batch (a large GGUF on a slow CPU)."""

    name = "slow"

    def embed(self, texts: Sequence[str]) -> object:
        import numpy as np

        time.sleep(0.2)
        return np.ones((len(texts), 4), dtype=np.float32) / 2


@pytest.mark.slow  # the real default embedder
@pytest.mark.parametrize("step", ["reading", "extracting", "embedding"])
def test_cancel_stops_indexing_at_every_step(
    make_chat: MakeChat, tmp_path: Path, step: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "big"
    folder.mkdir()
    if step == "reading":  # hashing and decoding a large text file
        (folder / "big.txt").write_text("harbor lantern words\n" * 3_000_000)
    elif step == "extracting":  # PDFium's pages
        write_pdf(folder / "long.pdf", [f"Page {i} about rule {i}." for i in range(400)])
    else:  # batches of passages through an embedding model
        for i in range(40):
            (folder / f"n{i}.md").write_text(f"note {i} " * 2_000)
    seen: list[Progress] = []
    chat = make_chat(backend=ScriptedBackend.from_texts("ok"))
    dialog = _dialog(chat, tmp_path)
    dialog.create_collection("Big")
    real = documents_ui.index_collection

    def watched(*args: object, progress: Callable[[Progress], None], **kwargs: object) -> IndexReport:
        def both(p: Progress) -> None:
            seen.append(p)
            progress(p)

        if step == "embedding":
            kwargs["embedder"] = SlowEmbedder()
        return real(*args, progress=both, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(documents_ui, "index_collection", watched)
    dialog.add_paths([folder])
    chat.qtbot.waitUntil(lambda: bool(seen) and (step != "embedding" or seen[-1].chunks > 0), timeout=WAIT_MS)
    dialog.buttons["cancel"].click()
    chat.qtbot.waitUntil(lambda: dialog.worker is None, timeout=WAIT_MS)
    assert "stopped; Re-index goes on from here" in dialog.detail.text()


@pytest.mark.slow  # the real default embedder
def test_names_with_controls_are_escaped_or_refused_in_the_window(make_chat: MakeChat, tmp_path: Path) -> None:
    """DC-22/23 in the window: a collection name with a newline is refused; file names show escaped."""
    chat = make_chat(backend=ScriptedBackend.from_texts("ok"))
    dialog = _dialog(chat, tmp_path)
    dialog.create_collection("a\nforged")
    assert dialog.detail.text().startswith("a collection name cannot hold control characters")
    assert dialog.list.count() == 0
    folder = tmp_path / "odd"
    folder.mkdir()
    (folder / "evil\u202egnp.pdf").write_bytes(b"%PDF-1.4 broken")
    dialog.create_collection("Odd")
    dialog.add_paths([folder])
    chat.qtbot.waitUntil(lambda: dialog.worker is None, timeout=WAIT_MS * 4)
    assert "evil\\u202egnp.pdf: is not a readable PDF" in dialog.detail.text()
    assert "\u202e" not in dialog.detail.text()


def test_a_reply_with_twenty_thousand_stored_sources_shows_a_bounded_row(make_chat: MakeChat) -> None:
    """IM-09: the sources are read back bounded, so opening the conversation is quick."""
    chat = make_chat(backend=ScriptedBackend.from_texts("ok"))
    history = chat.controller.history
    assert history is not None
    store = history.store
    conv = store.create_conversation(title="imported").id
    user = store.add_message(conv, "user", "question", parent_id=None)
    sources = [
        {"n": i, "path": f"/docs/{i}.md", "page": None, "start": 0, "end": 200, "score": 0.0, "text": "x" * 200}
        for i in range(1, 20_001)
    ]
    store.add_message(conv, "assistant", "answer [1]", parent_id=user, stats={"sources": sources})
    opened = asyncio.ensure_future(chat.controller.open_conversation(conv))
    chat.qtbot.waitUntil(opened.done, timeout=WAIT_MS * 4)
    row = chat.reply().sources_row.text()
    assert row.count('href="cite:') == MAX_STORED_SOURCES and f"[{MAX_STORED_SOURCES}] " in row


def test_a_passage_tooltip_shows_its_path_escaped() -> None:
    """DC-22 in the window's tooltip: a bidi override in a folder's name cannot reorder the line."""
    from desktop.qt.answer.citations import passage_tooltip
    from engine.events import SourceRef

    tip = passage_tooltip(SourceRef(1, "/docs/evil\u202e/gnp.md", None, 0, 5, 0.0, "hello"))
    assert "\u202e" not in tip and "evil\\u202e/gnp.md" in tip
