"""Render the app's main states to PNG files: `uv run python -m tests.tools.screenshots OUTDIR`.

The real `MainWindow` as `ember` builds it (sidebar, header, composer options, tools), at its
default size, on a scripted backend (no model is run), in a throwaway EMBER_HOME, so anyone
can regenerate the README's pictures after a change to the look and get the same states.
Offscreen unless QT_QPA_PLATFORM says otherwise (e.g. xcb on Xvfb, to include the window
manager's view):

    empty-new-chat.png          a new chat: the loaded model, example prompts, shortcuts
    conversation-code-thinking.png   an answer with its thinking pane open, code, math, a list and a table
    dark-mode.png               the conversation in the dark theme
    tool-approval.png           a tool call asking inline in the reply: arguments, Approve / Always allow / Deny
    used-tool.png               after it ran: the folded "Used calculator → 42" line and the answer
    reading-prompt.png          a long prompt being read: "Reading 1,600 tokens… 45 %"
    long-conversation-divider.png    a long conversation: the divider where the model's context begins
    window-800x600.png          the same window at 800×600
    malformed-reply-banner.png  a reply that was only tool-call scaffolding, twice: the banner
    model-picker.png            the model picker with the built-in model's details
    settings-dialog.png         the built-in model's settings dialog
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

STATES = (
    "empty-new-chat",
    "conversation-code-thinking",
    "dark-mode",
    "tool-approval",
    "used-tool",
    "reading-prompt",
    "long-conversation-divider",
    "window-800x600",
    "malformed-reply-banner",
    "model-picker",
    "settings-dialog",
)
SMALL_SIZE = (800, 600)
DEMO_SPEED = 38.6  # tok/s shown in the status bar (the scripted backend's own figure is meaningless)
QUESTION = "How do I read a CSV file in Python and sum a column?"
THINKING = (
    "The user wants to read a CSV and sum one column. The standard library's csv module is enough; "
    "DictReader gives rows by column name. I should show a short function, then mention pandas "
    "as an option for bigger files."
)
ANSWER = """Use the standard library's `csv` module; `DictReader` gives each row as a dict keyed by the header:

```python
import csv
from pathlib import Path


def column_total(path: Path, column: str) -> float:
    \"\"\"Sum one numeric column of a CSV file (empty cells count as 0).\"\"\"
    with path.open(newline="", encoding="utf-8") as f:
        return sum(float(row[column] or 0) for row in csv.DictReader(f))


print(column_total(Path("sales.csv"), "amount"))  # a long comment that runs past the edge of the block on purpose
```

A few things to watch:

- **Encoding**: pass `encoding="utf-8"` so the file reads the same on every system.
- **Empty cells** become `""`; the `or 0` treats them as zero.
- For large files, `pandas.read_csv(path)["amount"].sum()` is faster.

| Approach | Extra dependency | Good for |
|---|---|---|
| `csv.DictReader` | none | small and medium files |
| `pandas` | pandas | analysis, large files |

The mean of the column is $\\bar{x} = \\frac{1}{n}\\sum_{i=1}^{n} x_i$.
"""
TOOL_QUESTION = "What is 1,234 × 5,678? Use the calculator."
TOOL_CALL = '<tool_call>{"name": "calculator", "arguments": {"expression": "1234 * 5678"}}</tool_call>'
TOOL_ANSWER = "1,234 × 5,678 = **7,006,652**."


def _script() -> dict[str, object]:
    scaffolding: list[object] = [
        {"text": "<|tool_call_start|>", "special": True},
        '[get_weather(location="Paris")]',
        {"text": "<|tool_call_end|>", "special": True},
    ]
    answer: list[object] = [{"text": "<think>"}, THINKING, {"text": "</think>"}]
    answer += [ANSWER[i : i + 40] for i in range(0, len(ANSWER), 40)]
    tool: list[object] = ["I'll use the calculator. ", TOOL_CALL]
    # A long prompt being read: the progress the decode loop reports between batches.
    slow: list[object] = [
        {"progress": [0, 1600]},
        {"progress": [720, 1600], "delay_ms": 200},
        {"text": "Reading…", "delay_ms": 4000},
        " done.",
    ]
    # A context to count against, SmolLM2's own: the composer's meter shows a figure, as with a model.
    return {"replies": [answer, tool, [TOOL_ANSWER], slow, scaffolding, scaffolding, answer], "n_ctx": 8192}


def _long_conversation(store_path: Path) -> int:
    """A stored conversation of many turns (for the context divider)."""
    from engine.history.store import HistoryStore

    with HistoryStore(store_path) as store:
        conv = store.create_conversation(title="Planning a week in Lisbon")
        parent = None
        for day in range(1, 13):
            parent = store.add_message(conv.id, "user", f"What should I do on day {day}?", parent_id=parent)
            parent = store.add_message(
                conv.id,
                "assistant",
                f"Day {day}: a morning walk through a different "
                "neighbourhood, lunch at a tasca, and a museum in the afternoon.",
                parent_id=parent,
            )
        return conv.id


async def _until(check: Callable[[], bool], timeout_s: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not check():
        if loop.time() > deadline:
            raise TimeoutError("the window did not reach the state to capture")
        await asyncio.sleep(0.05)


async def _settle(seconds: float = 0.3) -> None:
    await asyncio.sleep(seconds)  # let layouts, fits and repaints run


async def capture(out: Path) -> list[Path]:
    """Drive a window through the states and save one PNG per state in `out`."""
    from PySide6.QtWidgets import QApplication, QWidget

    from desktop.core.history_session import open_history
    from desktop.core.model_choice import ModelChoice, local_choice
    from desktop.qt.chat.message_view import AssistantMessage, TurnBanner
    from desktop.qt.models.settings_dialog import open_settings_dialog
    from desktop.qt.window import DEFAULT_SIZE, MainWindow
    from engine.api.factory import parse_backend_spec
    from engine.runtime import Engine
    from engine.tools.permissions import Decision
    from models.gguf.meta import read_metadata
    from models.library.paths import ember_paths

    saved: list[Path] = []

    def shoot(widget: QWidget, name: str) -> None:
        QApplication.processEvents()
        path = out / f"{name}.png"
        widget.grab().save(str(path))
        saved.append(path)

    script = out / ".demo-script.json"
    script.write_text(json.dumps(_script()), encoding="utf-8")
    window = MainWindow(Engine(), open_history()[0])
    controller, models = window.controller, window.models
    window.resize(*DEFAULT_SIZE)
    window.show()
    try:
        choice = ModelChoice(parse_backend_spec(f"script:{script}"), label="SmolLM2 135M Instruct (demo)")
        await models.load(choice)
        await _settle()
        shoot(window, "empty-new-chat")

        await controller.send(QUESTION)
        await _until(lambda: not controller.busy)
        reply = window.last_reply()
        assert isinstance(reply, AssistantMessage)
        reply.thinking.set_expanded(True)
        reply.reveal.pin(True)
        window.status.show_speed(DEMO_SPEED)
        await _settle()
        shoot(window, "conversation-code-thinking")

        window.theme.set_mode("dark")
        await _settle()
        shoot(window, "dark-mode")
        window.theme.set_mode("light")

        await controller.new_conversation()
        window.tool_toggle.setChecked(True)
        turn = asyncio.ensure_future(controller.send(TOOL_QUESTION))
        area = window.tool_cards
        await _until(lambda: any(card.asking for card in area.cards.values()))
        await _settle()
        shoot(window, "tool-approval")
        next(iter(area.cards.values())).decide(Decision.APPROVE)
        await turn
        window.status.show_speed(DEMO_SPEED)
        await _settle()
        shoot(window, "used-tool")
        window.tool_toggle.setChecked(False)

        await controller.new_conversation()
        turn = asyncio.ensure_future(controller.send("Summarise the report I pasted above. " * 3))
        await _until(lambda: window.last_reply() is not None and controller.busy)
        reading = window.last_reply()
        assert isinstance(reading, AssistantMessage)
        await _until(lambda: reading.waiting.text().endswith("45 %"))  # through engine and controller
        await _settle()
        shoot(window, "reading-prompt")
        controller.stop()
        await turn

        history = controller.history
        if history is not None:
            long_id = _long_conversation(ember_paths().history_db)
            backend = controller.engine.backend
            if backend is not None:
                backend.n_ctx = 512  # type: ignore[attr-defined]  # a small context: the conversation outgrows it
            await controller.open_conversation(long_id)
            window.show_context_cut(10, 1)  # truncate-middle in a small context: day 1 and the last two
            await _settle(0.6)
            shoot(window, "long-conversation-divider")
            window.resize(*SMALL_SIZE)
            await _settle(0.6)
            shoot(window, "window-800x600")
            window.resize(*DEFAULT_SIZE)

        await controller.new_conversation()
        await controller.send("What's the weather in Paris?")
        await _until(lambda: not controller.busy and window.conversation.banner is not None)
        assert isinstance(window.conversation.banner, TurnBanner)
        await _settle()
        shoot(window, "malformed-reply-banner")

        picker = models.open_picker()
        await _until(lambda: picker.table.topLevelItemCount() > 0 and not picker.busy)
        picker.select_row(0)
        await _settle()
        shoot(picker, "model-picker")
        picker.close()

        builtin = local_choice(None)
        meta = read_metadata(builtin.model_file) if builtin.model_file else None
        dialog = await open_settings_dialog(window, builtin, builtin.label, meta)
        if dialog is not None:
            await _settle()
            shoot(dialog, "settings-dialog")
            dialog.close()
    finally:
        window.close()
        await controller.aclose()
        script.unlink(missing_ok=True)
    return saved


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m tests.tools.screenshots OUTDIR\n")
        return 2
    out = Path(args[0])
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    with tempfile.TemporaryDirectory(prefix="ember-shots-") as home:
        os.environ["EMBER_HOME"] = home  # no user history, settings or appearance is read or touched
        import qasync
        from PySide6.QtWidgets import QApplication

        app = QApplication(sys.argv[:1])
        app.setQuitOnLastWindowClosed(False)  # closing the picker must not end the run
        loop = qasync.QEventLoop(app)
        asyncio.set_event_loop(loop)
        try:
            saved = loop.run_until_complete(capture(out))
        finally:
            loop.close()
            asyncio.set_event_loop(None)
    for path in saved:
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
