"""Issue #50: the five `docs_answers` questions asked in the real window, with the built-in model, greedy.

    QT_QPA_PLATFORM=xcb DISPLAY=:N uv run --no-sync python -m tests.tools.docs_answers_window OUTDIR

In a throwaway EMBER_HOME: the held-out corpus indexed with the defaults as the collection
`heldout` (as `tests.bench.docs_answers` does), the built-in model's temperature saved as 0 (what
a user sets in its Settings; `ember chat --temperature 0` in the bench), then the window as `ember`
opens it. Each question goes into a new conversation with the collection chosen in the Documents
dialog, typed and sent; once the reply is whole, its sources row is recorded and the window is
photographed at its default size and at 800×600 (`answer-N-default.png`, `answer-N-800x600.png`,
with `import` from ImageMagick, so the window manager's frame shows). `OUTDIR/rows.json` holds,
per answer: the answer, the row's text, the files it links and whether the answer's file is one.
"""

from __future__ import annotations

# isort: off
import engine.llama.llama_first  # noqa: F401  # pyright: ignore[reportUnusedImport]  (llama.cpp before numpy)
# isort: on

import asyncio
import dataclasses
import html
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SMALL = (800, 600)
REPLY_TIMEOUT_S = 900.0  # one answer of the built-in model on a loaded 2-core machine


def _prepare(tmp: Path) -> None:
    """The collection and the greedy setting, before the window (and its history) opens."""
    from engine.api.models import model_settings
    from engine.docs.embed import DEFAULT_EMBEDDER, shared_embedder
    from engine.docs.index import DocIndex, default_path
    from engine.docs.indexer import index_collection
    from models.library.default_model import default_model_path
    from models.library.settings import save_model_settings
    from tests.bench.docs_answers import COLLECTION
    from tests.bench.docs_heldout_corpus import write_corpus

    write_corpus(tmp / "corpus")
    with DocIndex.open(default_path()) as index:
        coll = index.create_collection(COLLECTION, DEFAULT_EMBEDDER)
        index.add_roots(coll, [tmp / "corpus"])
        index_collection(index, coll, embedder=shared_embedder(DEFAULT_EMBEDDER))
    builtin = default_model_path()
    save_model_settings(builtin, dataclasses.replace(model_settings(builtin), temperature=0.0))


def _shot(window: Any, path: Path) -> None:
    from PySide6.QtWidgets import QApplication

    for _ in range(5):
        QApplication.processEvents()
    frame = window.frameGeometry()
    crop = f"{frame.width()}x{frame.height()}+{frame.x()}+{frame.y()}"
    subprocess.run(["import", "-window", "root", "-crop", crop, str(path)], check=False, timeout=60)


async def _until(test: Any, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not test():
        if time.monotonic() > deadline:
            raise TimeoutError("the window did not get there in time")
        await asyncio.sleep(0.1)


async def _ask(window: Any, question: str) -> Any:
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    from tests.bench.docs_answers import COLLECTION

    controller = window.controller
    await controller.new_conversation()
    dialog = window.documents_button.open_collections()
    items = dialog.list.findItems(COLLECTION, Qt.MatchFlag.MatchStartsWith)
    dialog.list.setCurrentItem(items[0])
    dialog.buttons["use"].click()
    dialog.close()
    window.composer.edit.setPlainText(question)
    window.composer.edit.setFocus()
    QTest.keyClick(window.composer.edit, Qt.Key.Key_Return)
    await _until(lambda: (r := window.last_reply()) is not None and r.finished and not controller.busy, REPLY_TIMEOUT_S)
    return window.last_reply()


def _row(reply: Any, answer_file: str) -> dict[str, Any]:
    row = reply.sources_row.text()
    shown = [html.unescape(m) for m in re.findall(r'<a href="cite:\d+">\[\d+\] ([^<]*)</a>', row)]
    bold = [html.unescape(m) for m in re.findall(r'<b><a href="cite:\d+">\[\d+\] ([^<]*)</a></b>', row)]
    return {
        "answer": reply.answer_text(),
        "row": row,
        "row_visible": reply.sources_row.isVisible(),
        "heading": row.split(":")[0],
        "supporting": bold,
        "linked": shown,
        "answer_file_supporting": any(name.startswith(answer_file) for name in bold),
        "answer_file_shown": any(name.startswith(answer_file) for name in shown),
    }


async def _run(out: Path) -> list[dict[str, Any]]:
    from desktop.core.model_choice import choose_model
    from desktop.qt.app import open_window
    from tests.bench.docs_answers import QUESTIONS

    window = open_window()
    window.restore_state()
    window.show()
    await window.models.load(choose_model(None, None))
    greedy = window.controller.models.turn_settings().sampling.temperature
    if greedy != 0.0:
        raise SystemExit(f"the built-in model's saved temperature did not apply: {greedy}")
    default = (window.width(), window.height())
    rows: list[dict[str, Any]] = []
    for i, (question, answer_file) in enumerate(QUESTIONS, start=1):
        print(f"[{time.strftime('%H:%M:%S')}] asking {i}: {question}", file=sys.stderr, flush=True)
        started = time.perf_counter()
        reply = await _ask(window, question)
        window.resize(*default)
        await asyncio.sleep(0.5)
        _shot(window, out / f"answer-{i}-default.png")
        window.resize(*SMALL)
        await asyncio.sleep(0.5)
        _shot(window, out / f"answer-{i}-800x600.png")
        window.resize(*default)
        rows.append(
            {"question": question, "answer_file": answer_file, "seconds": round(time.perf_counter() - started, 1)}
            | {"default_size": list(default)}
            | _row(reply, answer_file)
        )
        (out / "rows.json").write_text(json.dumps(rows, indent=2, ensure_ascii=False), encoding="utf-8")
    window.close()
    await window.controller.aclose()
    return rows


def main(argv: list[str] | None = None) -> int:
    import qasync

    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0] if args else "docs-answers-window").resolve()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ember-answers-window-") as name:
        os.environ["EMBER_HOME"] = str(Path(name) / "home")
        _prepare(Path(name))
        from desktop.qt.app import _application  # pyright: ignore[reportPrivateUsage]

        app = _application()
        loop = qasync.QEventLoop(app)
        asyncio.set_event_loop(loop)
        try:
            rows = loop.run_until_complete(_run(out))
        finally:
            loop.close()
    print(json.dumps(rows, indent=2, ensure_ascii=False))
    return 0 if all(r["answer_file_shown"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
