"""How long the GUI's event loop stalls while a fast reply streams into the real window.

`measure_ui_stall()` opens a `MainWindow` on a paced scripted backend (realistic Markdown:
thinking, paragraphs, lists, headings, code blocks), sends one message and samples the
event loop with a 5 ms precise timer. A stall is how late a tick fired. `ember bench`
calls this; tests call it with a small `n_tokens` and never assert timings.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import os
import sys
import time
from collections.abc import Iterator

import qasync
from PySide6.QtCore import QMimeData, QObject, Qt, QTimer
from PySide6.QtWidgets import QApplication, QWidget

from desktop.core.controller import ChatController
from desktop.core.model_choice import ModelInfo
from desktop.qt.chat.message_view import AssistantMessage
from desktop.qt.chat.tool_card import ToolCallCard
from desktop.qt.window import MainWindow
from engine.backends.base import PlainBackend, Request, StreamInfo
from engine.cancel import CancelToken
from engine.events import FinishReason, Piece, ToolCall
from engine.runtime import Engine
from engine.session.session import ChatSession

PROBE_INTERVAL_MS = 5
THINKING_SHARE = 0.1  # the first tenth of the tokens is thinking
_WORDS = (
    "the model streams tokens into the window while the event loop keeps painting and "
    "answering input so nothing ever looks frozen even when replies are long and fast"
).split()


def bench_tokens(n_tokens: int) -> list[str]:
    """`n_tokens` pieces of a deterministic, Markdown-rich reply that starts with thinking."""
    thinking = max(1, int(n_tokens * THINKING_SHARE))
    out = ["<think>", *(f"{_WORDS[i % len(_WORDS)]} " for i in range(thinking - 2)), "</think>"]
    out.extend(itertools.islice(_answer_tokens(), max(0, n_tokens - len(out))))
    return out[:n_tokens]


def _answer_tokens() -> Iterator[str]:
    i = 0
    while True:
        section = i // 900
        if i % 900 == 0:
            yield f"\n\n## Section {section + 1}\n\n"
        elif i % 900 == 450:
            yield from _code_tokens(section)
        elif i % 300 == 150:
            yield from ("\n\n- first point with `code`\n", "- second point\n", "- **third** point\n\n")
        elif i % 60 == 59:
            yield ".\n\n"
        else:
            yield f"{_WORDS[i % len(_WORDS)]} "
        i += 1


def _code_tokens(section: int) -> Iterator[str]:
    yield "\n\n```python\n"
    for line in range(12):
        yield f"def step_{section}_{line}(x):\n"
        yield f"    return x * {line} + {section}\n"
    yield "```\n\n"


class PacedBackend(PlainBackend):
    """A scripted backend that replays pieces at a fixed rate, however fast it is consumed."""

    def __init__(self, pieces: list[str], tokens_per_s: float) -> None:
        self.name = "stall bench"
        self._pieces = pieces
        self._rate = tokens_per_s
        self.first_token_at = 0.0
        self.last_token_at = 0.0

    def stream(self, request: Request, cancel: CancelToken, info: StreamInfo) -> Iterator[Piece]:
        start = time.perf_counter()
        self.first_token_at = start
        for i, text in enumerate(self._pieces):
            if cancel.cancelled:
                info.finish_reason = FinishReason.CANCELLED
                return
            ahead = start + i / self._rate - time.perf_counter()
            if ahead > 0.001:
                time.sleep(ahead)  # on schedule: a late stream catches up in a burst instead
            self.last_token_at = time.perf_counter()
            yield Piece(text)
        info.completion_tokens = len(self._pieces)

    def close(self) -> None:
        pass


class StallProbe(QObject):
    """Records how late each tick of a precise timer fires."""

    def __init__(self, interval_ms: int = PROBE_INTERVAL_MS) -> None:
        super().__init__()
        self._interval = interval_ms / 1000
        self._last = 0.0
        self.stalls_ms: list[float] = []
        self._timer = QTimer(self)
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self._tick)

    def start(self) -> None:
        self._last = time.perf_counter()
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()
        self._tick()

    def _tick(self) -> None:
        now = time.perf_counter()
        self.stalls_ms.append(max(0.0, (now - self._last - self._interval) * 1000))
        self._last = now


HUGE_PIECE_CHARS = 1_000_000


def huge_piece(chars: int = HUGE_PIECE_CHARS) -> list[str]:
    """One reply of `chars` characters with no space and no newline, arriving as ONE piece."""
    return ["x" * chars]


def measure_ui_stall(
    n_tokens: int = 20000,
    tokens_per_s: int = 2000,
    huge_piece_chars: int = HUGE_PIECE_CHARS,
    line_chars: int = HUGE_PIECE_CHARS,
) -> dict[str, float]:
    """Stream `n_tokens` at `tokens_per_s` into a real window; report the loop's stalls (ms).

    Keys: ui_max_stall_ms, ui_p99_stall_ms, ui_catchup_ms (from the last token to the full
    text on screen), tokens_per_s_actual; then the same stalls for a reply that is one huge
    piece (`huge_piece_chars`, no spaces or newlines): ui_huge_piece_max_stall_ms,
    ui_huge_piece_p99_stall_ms, ui_huge_piece_catchup_ms (0 chars: not measured); and the
    worst stalls while an approval card shows an argument of `line_chars` characters on one line
    (ui_card_line_max_stall_ms), while such a line is pasted into the composer
    (ui_paste_line_max_stall_ms) and while it is then sent (ui_send_line_max_stall_ms).
    Must be called without a running asyncio loop.
    """
    app = application()
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    try:
        result = loop.run_until_complete(run_stall_bench(n_tokens, tokens_per_s))
        if huge_piece_chars:
            huge = loop.run_until_complete(run_stall_bench(1, 1000, pieces=huge_piece(huge_piece_chars)))
            result.update({f"ui_huge_piece_{k.removeprefix('ui_')}": v for k, v in huge.items() if k.startswith("ui_")})
        if line_chars:
            result["ui_card_line_max_stall_ms"] = loop.run_until_complete(run_card_bench(line_chars))
            paste, send = loop.run_until_complete(run_paste_bench(line_chars))
            result.update(ui_paste_line_max_stall_ms=paste, ui_send_line_max_stall_ms=send)
        return result
    finally:
        loop.close()
        asyncio.set_event_loop(None)
        # Free the loop's Qt timer object here, on the GUI thread: left to a later cyclic
        # collection it can be freed on whatever thread triggers it (a history or counting
        # worker), and Qt then fires a timer of a deleted object ("Timers cannot be stopped
        # from another thread", then a segfault in the next test).
        del loop
        gc.collect()


async def run_stall_bench(n_tokens: int, tokens_per_s: int, *, pieces: list[str] | None = None) -> dict[str, float]:
    """The measurement itself, for a caller already inside a qasync loop (`pieces`: the reply)."""
    backend = PacedBackend(pieces if pieces is not None else bench_tokens(n_tokens), tokens_per_s)
    window = MainWindow(Engine(backend), ChatSession.unsaved())
    controller = window.controller
    window.model_ready(ModelInfo("Stall bench", "Scripted"))
    window.show()
    await asyncio.sleep(0.2)  # first layout and paint happen before measuring
    settled: list[float] = []
    probe = StallProbe()
    probe.start()
    try:
        await _send_and_settle(controller, window, settled)
    finally:
        probe.stop()
        await controller.aclose()
        window.close()
        window.deleteLater()
    return _report(probe.stalls_ms, backend, settled[0] if settled else time.perf_counter(), n_tokens)


async def _send_and_settle(controller: ChatController, window: MainWindow, settled: list[float]) -> None:
    replies: list[AssistantMessage] = []

    def watch(reply: AssistantMessage) -> None:
        replies.append(reply)
        reply.settled.connect(lambda: settled.append(time.perf_counter()))

    window.replyStarted.connect(watch)
    await controller.send("Write a long answer.")
    # A bulk answer is still being put on screen a slice per loop turn after it settled.
    for _ in range(12_000):  # at most a minute
        if not replies or replies[-1].on_screen():
            break
        await asyncio.sleep(0.005)
    if settled:
        settled[0] = time.perf_counter()


async def run_card_bench(chars: int) -> float:
    """Worst stall (ms) while an approval card with a `chars`-character one-line argument appears."""
    host = QWidget()
    host.resize(800, 500)
    host.show()
    await asyncio.sleep(0.1)
    probe = StallProbe()
    probe.start()
    try:
        card = ToolCallCard(ToolCall("c1", "calculator", {"expression": "1+1", "junk": "J" * chars}), host)
        card.resize(780, 400)
        card.show()
        card.set_asking(True)
        for _ in range(12_000):  # at most a minute
            if card.arguments.caught_up:
                break
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.05)
    finally:
        probe.stop()
        host.close()
        host.deleteLater()
    return round(max(probe.stalls_ms, default=0.0), 1)


async def run_paste_bench(chars: int) -> tuple[float, float]:
    """Worst stalls (ms) while a `chars`-character line is pasted into the real window's composer,
    then while it is sent (stored, shown as the user's message, answered)."""
    backend = PacedBackend(["ok"], 1000)
    window = MainWindow(Engine(backend), ChatSession.unsaved())
    controller = window.controller
    window.model_ready(ModelInfo("Stall bench", "Scripted"))
    window.show()
    await asyncio.sleep(0.2)
    settled: list[float] = []
    window.replyStarted.connect(lambda reply: reply.settled.connect(lambda: settled.append(time.perf_counter())))
    probe = StallProbe()
    probe.start()
    try:
        mime = QMimeData()
        mime.setText("J" * chars)
        window.composer.edit.insertFromMimeData(mime)
        await asyncio.sleep(0.3)
        paste = max(probe.stalls_ms, default=0.0)
        probe.stalls_ms.clear()
        window.composer.submit()
        for _ in range(12_000):  # at most a minute
            if settled:
                break
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.05)
    finally:
        probe.stop()
        await controller.aclose()
        window.close()
        window.deleteLater()
    return round(paste, 1), round(max(probe.stalls_ms, default=0.0), 1)


def _report(stalls: list[float], backend: PacedBackend, settled_at: float, n_tokens: int) -> dict[str, float]:
    ordered = sorted(stalls) or [0.0]
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    span = backend.last_token_at - backend.first_token_at
    return {
        "ui_max_stall_ms": round(ordered[-1], 1),
        "ui_p99_stall_ms": round(p99, 1),
        "ui_catchup_ms": round(max(0.0, settled_at - backend.last_token_at) * 1000, 1),
        "tokens_per_s_actual": round(n_tokens / span, 1) if span > 0 else 0.0,
    }


def application() -> QApplication:
    existing = QApplication.instance()
    if isinstance(existing, QApplication):
        return existing
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # a bench must run headless too
    return QApplication(sys.argv[:1])
