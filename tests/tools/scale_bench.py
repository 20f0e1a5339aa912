"""The window at scale, offscreen: a 2,000-message conversation and a sidebar of 5,000.

`measure_scale()` builds a throwaway history (in a temporary EMBER_HOME), opens the real
window on it and reports, in milliseconds:

- ``gui_open_2000_ms``: opening a stored 2,000-message conversation until its first paint;
- ``gui_open_2000_all_ms``: the same conversation with every message widget built at once
  (what opening cost before widgets were built lazily), side by side in the same run;
- ``gui_stream_2000_max_stall_ms`` / ``gui_stream_2000_p99_stall_ms``: the event loop's worst
  and 99th-percentile lateness while a fast reply streams into that conversation;
- ``sidebar_5000_fill_ms``, ``sidebar_5000_search_ms``: listing 5,000 conversations, and one
  search over them, each until painted;
- ``sidebar_5000_scroll_max_ms``: the slowest step while scrolling that list top to bottom
  (older conversations are read a page at a time as the end comes near).

`ember bench` runs it in a child interpreter; tests call it small and never assert timings.
"""

from __future__ import annotations

import asyncio
import gc
import os
import tempfile
import time
from typing import Any

import qasync
from PySide6.QtWidgets import QApplication

from desktop.core.controller import ChatController
from desktop.core.history_session import open_history
from desktop.core.model_choice import ModelInfo
from desktop.qt.history.sidebar import HistorySidebar
from desktop.qt.window import MainWindow
from engine.history.store import HistoryStore
from engine.runtime import Engine
from models.library.paths import ember_paths
from tests.tools.stall_bench import PacedBackend, StallProbe, application, bench_tokens

ANSWER = (
    "Here is a **short** answer with `code` and a list:\n\n- one point\n- another point\n\n"
    "And a closing paragraph that wraps over a couple of lines in the window. "
)


def measure_scale(
    messages: int = 2000,
    conversations: int = 5000,
    stream_tokens: int = 3000,
    tokens_per_s: int = 2000,
    compare_eager: bool = True,
) -> dict[str, Any]:
    """Run the whole measurement in a fresh qasync loop (call it without a running loop)."""
    app = application()
    with tempfile.TemporaryDirectory(prefix="ember-scale-") as home:
        os.environ["EMBER_HOME"] = home
        conv_id = _fill_history(messages, conversations)
        loop = qasync.QEventLoop(app)
        asyncio.set_event_loop(loop)
        try:
            result = loop.run_until_complete(
                _measure(app, conv_id, messages, conversations, stream_tokens, tokens_per_s, compare_eager)
            )
        finally:
            loop.close()
            asyncio.set_event_loop(None)
            del loop
            gc.collect()  # the loop's Qt timer object freed on this thread (see stall_bench.measure_ui_stall)
    return result


def _fill_history(messages: int, conversations: int) -> int:
    with HistoryStore(ember_paths().ensure().history_db) as store, store.transaction():
        for i in range(conversations - 1):
            conv = store.create_conversation(title=f"Conversation {i} about topic {i % 97}")
            store.add_message(conv.id, "user", f"question {i} about topic {i % 97}", parent_id=None)
        long = store.create_conversation(title="The long one")
        parent = None
        for i in range(messages // 2):
            parent = store.add_message(long.id, "user", f"Question {i}: tell me more about item {i}.", parent_id=parent)
            parent = store.add_message(long.id, "assistant", f"Answer {i}. {ANSWER}", parent_id=parent)
        return long.id


async def _measure(
    app: QApplication,
    conv_id: int,
    messages: int,
    conversations: int,
    stream_tokens: int,
    tokens_per_s: int,
    compare_eager: bool,
) -> dict[str, Any]:
    backend = PacedBackend(bench_tokens(stream_tokens), tokens_per_s)
    session, _notice = open_history()
    window = MainWindow(Engine(backend), session)
    controller = window.controller
    window.model_ready(ModelInfo("Scale bench", "Scripted"))
    window.show()
    await asyncio.sleep(0.3)
    out: dict[str, Any] = {"gui_messages": messages, "sidebar_conversations": conversations}
    try:
        out["gui_open_2000_ms"] = await _open_ms(app, window, controller, conv_id)
        if compare_eager:
            out["gui_open_2000_all_ms"] = await _open_eager_ms(app, window, controller, conv_id)
            await controller.open_conversation(conv_id)
        out.update(await _stream_stalls(window, controller))
        sidebar = window.sidebar
        if isinstance(sidebar, HistorySidebar):
            out.update(await _sidebar_figures(app, sidebar, conversations))
    finally:
        await controller.aclose()
        window.close()
        window.deleteLater()
    return out


async def _open_ms(app: QApplication, window: MainWindow, controller: ChatController, conv_id: int) -> float:
    await controller.new_conversation()
    await _settle_async()
    start = time.perf_counter()
    await controller.open_conversation(conv_id)
    _paint(app, window)
    return _ms(start)


async def _open_eager_ms(app: QApplication, window: MainWindow, controller: ChatController, conv_id: int) -> float:
    """Opening with every widget built at once (the backlog drained before the first paint)."""
    await controller.new_conversation()
    await _settle_async()
    start = time.perf_counter()
    await controller.open_conversation(conv_id)
    while window.conversation.load_older():
        pass
    _paint(app, window)
    elapsed = _ms(start)
    await controller.new_conversation()
    await _settle_async()
    return elapsed


async def _stream_stalls(window: MainWindow, controller: ChatController) -> dict[str, float]:
    probe = StallProbe()
    probe.start()
    try:
        await controller.send("One more question, please answer at length.")
    finally:
        probe.stop()
    ordered = sorted(probe.stalls_ms) or [0.0]
    return {
        "gui_stream_2000_max_stall_ms": round(ordered[-1], 1),
        "gui_stream_2000_p99_stall_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 1),
    }


async def _sidebar_figures(app: QApplication, sidebar: HistorySidebar, conversations: int) -> dict[str, float]:
    out: dict[str, float] = {}
    # Fill and search: until the rows are on screen (read on the history thread, then shown).
    start = time.perf_counter()
    await sidebar.refresh()
    _paint(app, sidebar)
    out["sidebar_5000_fill_ms"] = _ms(start)
    sidebar.search.setText("topic 42")
    start = time.perf_counter()
    await sidebar.refresh()  # what the search box's timer runs
    _paint(app, sidebar)
    out["sidebar_5000_search_ms"] = _ms(start)
    sidebar.search.setText("")
    await sidebar.refresh()
    _paint(app, sidebar)
    # Scroll to the very end, half a page per step, as pages of older conversations are read
    # (off the GUI thread): the slowest step, or the longest the GUI thread was held meanwhile.
    listing, bar = sidebar.list, sidebar.list.verticalScrollBar()
    worst, steps = 0.0, 0
    probe = StallProbe()
    probe.start()
    while (len(listing.conversation_ids()) < conversations or bar.value() < bar.maximum()) and steps < 5000:
        start = time.perf_counter()
        bar.setValue(bar.value() + max(1, listing.viewport().height() // 2))
        _paint(app, listing)
        worst = max(worst, _ms(start))
        await asyncio.sleep(0)
        if sidebar.page_read is not None and not sidebar.page_read.done():
            await sidebar.page_read  # the page is appended as the read ends (the probe sees that)
        steps += 1
    probe.stop()
    out["sidebar_5000_scroll_max_ms"] = round(max(worst, *probe.stalls_ms), 1)
    out["sidebar_5000_listed"] = len(listing.conversation_ids())  # date headers are rows too: not counted
    return out


def _paint(app: QApplication, widget: Any) -> None:
    """Run the pending layout, then paint now: the time a user waits to see it.

    Posted events only (layout requests), not the whole event loop: this runs inside a
    coroutine, and re-entering the asyncio loop from here is not allowed.
    """
    del app
    QApplication.sendPostedEvents()
    widget.repaint()


async def _settle_async() -> None:
    await asyncio.sleep(0.1)


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 1)


if __name__ == "__main__":  # `python -m tests.tools.scale_bench`: the figures as JSON
    import json

    print(json.dumps(measure_scale()))
