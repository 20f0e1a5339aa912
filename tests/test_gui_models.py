"""The model picker, switching models and per-model settings, driven through the window."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import gguf_factory as gf
import pytest
from gui_helpers import WAIT_MS, Chat, FakePrompts, click, open_picker, row_named
from pytestqt.qtbot import QtBot

from desktop.core.model_choice import ModelChoice, choose_model, local_choice
from desktop.qt.app import open_window, run_session
from desktop.qt.models.model_picker import ModelPicker
from desktop.qt.models.settings_dialog import NO_GPU, ModelSettingsDialog
from engine.api.factory import BackendSpec
from engine.backends.base import Backend
from engine.backends.scripted import ScriptedBackend
from engine.llama import llama as llama_backend
from models.gguf.builtin_templates import BASE_MODEL_NOTE
from models.library import memory
from models.library.memory import format_bytes
from models.library.scan import load_library_state, note_opened
from models.library.settings import ModelSettings, load_model_settings, save_model_settings

pytest_plugins = ["gui_helpers"]

TINY = "tiny.gguf"  # rows are named by file; the model's own name is their second line


@pytest.fixture
def zoo(tmp_path: Path) -> Path:
    """A folder with a good tiny model (in a subfolder) and a truncated one."""
    folder = tmp_path / "zoo"
    (folder / "sub").mkdir(parents=True)
    gf.write_tiny_llama(folder / "sub" / "tiny.gguf")
    cut = gf.write_tiny_llama(folder / "cut.gguf", name="Cut model")
    os.truncate(cut, cut.stat().st_size - 1000)
    return folder


class ReadyChoice(ModelChoice):
    """A choice whose factory hands back a prepared backend, once `gate` opens."""

    backend: Backend = ScriptedBackend.from_texts("unused")
    gate = threading.Event()

    def factory(self) -> Backend:
        assert self.gate.wait(5)
        return self.backend


def add_zoo(chat: Chat, zoo: Path):  # type: ignore[no-untyped-def]
    picker = open_picker(chat, FakePrompts(folders=[zoo]))
    with chat.qtbot.waitSignal(picker.scanned, timeout=WAIT_MS):
        click(chat.qtbot, picker.add_folder)
    return picker


def test_picker_lists_the_builtin_model_and_an_added_folder(make_chat, qtbot: QtBot, zoo: Path) -> None:
    chat: Chat = make_chat("hi")
    picker = add_zoo(chat, zoo)
    assert load_library_state().folders == (zoo,)
    builtin = picker.rows[0]
    assert builtin.source == "Built in" and builtin.line.startswith("Llama · ") and " · Q4_1 · " in builtin.line
    assert builtin.choice.path is None  # the built-in loads as the default model
    tiny = picker.rows[row_named(picker, TINY)]
    size = format_bytes((zoo / "sub" / "tiny.gguf").stat().st_size)
    assert tiny.name == TINY and tiny.metadata is not None and tiny.metadata.n_ctx_train == 2048
    item = picker.table.topLevelItem(row_named(picker, TINY))
    # The file, then one line in words (its own name, the source and the path are in its tooltip).
    assert item is not None and item.text(0) == f"tiny.gguf\nLlama · 121K · F32 · {size} · 2K context"
    assert "Tiny Llama (test)" in item.toolTip(0) and str(zoo / "sub" / "tiny.gguf") in item.toolTip(0)
    assert "Added folder" in item.toolTip(0)
    assert picker.width() <= chat.window.width()  # the picker fits the window it belongs to


def test_an_unloadable_file_gets_no_memory_estimate_and_notes_clear(make_chat, qtbot: QtBot, zoo: Path) -> None:
    chat: Chat = make_chat("hi")
    picker = add_zoo(chat, zoo)
    picker.select_row(row_named(picker, "cut.gguf"))
    assert "0 B" not in picker.details.memory.text()
    picker._say("Added a folder.", for_ms=50)  # pyright: ignore[reportPrivateUsage]
    qtbot.waitUntil(lambda: picker.message.text() == "", timeout=WAIT_MS)


def test_details_pane_shows_metadata_and_memory(
    make_chat, qtbot: QtBot, zoo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat: Chat = make_chat("hi")
    picker = add_zoo(chat, zoo)
    picker.select_row(row_named(picker, TINY))
    picker.details.expander.click()  # the metadata dump waits behind Details
    facts = picker.details.browser.toPlainText()
    for expected in (
        "Architecture",
        "chatml",
        "Thinking markers",
        "Tool-call markers",
        "Training context",
        "2,048",
        '"architecture": "llama"',
        '"template_family": "chatml"',
        str(zoo / "sub"),
    ):
        assert expected in facts, expected
    assert "2,048-token context" in picker.details.memory.text()  # the saved context, capped at training
    assert picker.details.warning.isHidden()
    monkeypatch.setattr(memory, "available_memory", lambda: 1000)  # 1 KB free: nothing fits
    picker.select_row(0)
    picker.select_row(row_named(picker, TINY))
    assert not picker.details.warning.isHidden()
    assert "only 1.0 KB is free" in picker.details.warning.text()


def test_bad_files_show_their_reason_and_cannot_be_loaded(make_chat, qtbot: QtBot, zoo: Path, tmp_path: Path) -> None:
    chat: Chat = make_chat("hi")
    picker = add_zoo(chat, zoo)
    cut = picker.rows[row_named(picker, "cut.gguf")]
    assert cut.error is not None and cut.error.startswith("truncated")
    picker.select_row(row_named(picker, "cut.gguf"))
    assert not picker.load.isEnabled() and "Incomplete download" in picker.load.toolTip()
    assert "Cannot load" in picker.details.browser.toPlainText()
    assert "truncated" not in picker.details.browser.toPlainText()  # the reader's words: behind Details
    picker.details.expander.click()
    assert "truncated" in picker.details.browser.toPlainText()
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a model at all")
    projector = gf.write_projector(tmp_path / "vision.gguf")
    picker.prompts = FakePrompts(files=[junk, projector])
    with qtbot.waitSignal(picker.scanned, timeout=WAIT_MS):
        click(qtbot, picker.open_file)
    assert picker.selected() is not None and picker.selected().name == "junk.gguf"  # type: ignore[union-attr]
    assert picker.selected().problem == "Not a GGUF model (this is a text file)"  # type: ignore[union-attr]
    assert load_library_state().recent[0] == junk and load_library_state().last_used is None
    click(qtbot, picker.open_file)
    qtbot.waitUntil(lambda: "vision.gguf is not a chat model" in picker.message.text(), timeout=WAIT_MS)
    assert "projector" in picker.message.text()


def test_a_failed_load_keeps_the_previous_model_working(make_chat, qtbot: QtBot, zoo: Path) -> None:
    chat: Chat = make_chat("still here")
    before = chat.window.header.model_label
    bad = local_choice(zoo / "cut.gguf")
    load = asyncio.ensure_future(chat.models.load(bad))
    qtbot.waitUntil(load.done, timeout=WAIT_MS)
    assert load.result() is False
    notice = chat.window.notice.text()
    assert "cut.gguf" in notice and "incomplete" in notice and f"Still using {before}" in notice
    assert "truncated" in chat.window.notice.details.text()  # llama.cpp's own words, behind Details
    assert chat.window.header.model_label == before and not chat.window.header.loading
    assert chat.window.status.model.text() == before
    assert chat.controller.models.choice is None and chat.engine.backend is chat.backend
    chat.type_and_send("are you there?")
    assert chat.wait_reply_finished().answer_text() == "still here"


def test_loading_shows_progress_and_keeps_the_current_model_named(make_chat, qtbot: QtBot) -> None:
    chat: Chat = make_chat("old")
    header = chat.window.header
    before = header.model_label
    ReadyChoice.gate.clear()
    ReadyChoice.backend = ScriptedBackend.from_texts("new")
    load = asyncio.ensure_future(chat.models.load(ReadyChoice(BackendSpec("script", "x"), label="Next model")))
    qtbot.waitUntil(lambda: header.loading, timeout=WAIT_MS)
    assert header.loading_label.text() == "Loading Next model…" and header.loading_bar.maximum() == 0
    assert header.model_label == before
    ReadyChoice.gate.set()
    qtbot.waitUntil(load.done, timeout=WAIT_MS)
    assert header.model_label == "Next model" and not header.loading


def test_choosing_a_tiny_model_in_the_picker_loads_it_with_its_settings(make_chat, qtbot: QtBot, zoo: Path) -> None:
    tiny = zoo / "sub" / "tiny.gguf"
    save_model_settings(tiny, ModelSettings(context_length=1024, threads=2))
    chat: Chat = make_chat("scripted")
    picker = add_zoo(chat, zoo)
    picker.select_row(row_named(picker, TINY))
    click(qtbot, picker.load)
    qtbot.waitUntil(lambda: chat.controller.models.choice is not None, timeout=WAIT_MS * 2)
    backend = chat.engine.backend
    assert isinstance(backend, llama_backend.LlamaBackend)
    assert backend.path == tiny and backend.n_ctx == 1024
    header = chat.window.header  # the model's own name, not the file's
    qtbot.waitUntil(lambda: header.model_label == "Tiny Llama (test) (F32)", timeout=WAIT_MS)
    assert chat.window.status.device.text().startswith("CPU")
    assert load_library_state().last_used == tiny  # it comes back at the next start
    assert choose_model(None, None).path == tiny
    assert not picker.isVisible()
    assert open_picker(chat).selected().path == tiny  # type: ignore[union-attr]
    assert picker.table.currentItem().text(0).endswith(" · loaded")  # type: ignore[union-attr]


def test_turns_use_the_models_sampling_length_and_system_prompt(make_chat, qtbot: QtBot) -> None:
    chat: Chat = make_chat("unused")
    ReadyChoice.gate.set()
    ReadyChoice.backend = backend = ScriptedBackend.from_texts("first", "second")  # it records requests
    settings = ModelSettings(temperature=0.2, top_k=7, seed=42, max_tokens=77, system_prompt="Be terse.")
    choice = ReadyChoice(BackendSpec("llama"), Path("m.gguf"), "m", settings=settings)
    load = asyncio.ensure_future(chat.controller.models.load(choice))
    qtbot.waitUntil(load.done, timeout=WAIT_MS)
    chat.type_and_send("hello")
    chat.wait_reply_finished()
    request = backend.requests[0]
    assert request.messages[0]["role"] == "system"
    assert request.messages[0]["content"].startswith("Be terse.")  # the engine may add its own line after
    assert (request.sampling.temperature, request.sampling.top_k, request.sampling.seed) == (0.2, 7, 42)
    assert request.max_tokens == 77
    chat.models.apply_settings(choice.with_settings(ModelSettings(temperature=1.5)))
    chat.type_and_send("again")
    qtbot.waitUntil(lambda: len(backend.requests) == 2, timeout=WAIT_MS)
    chat.wait_idle()
    assert backend.requests[1].sampling.temperature == 1.5  # a saved change applies to the next turn
    assert backend.requests[1].max_tokens == 4096  # no limit: up to the context


def _tiny_settings(chat: Chat, qtbot: QtBot, zoo: Path) -> tuple[ModelPicker, ModelSettingsDialog]:
    """The picker, and the settings dialog it opened for the tiny model."""
    picker = add_zoo(chat, zoo)
    picker.select_row(row_named(picker, TINY))
    click(qtbot, picker.settings)
    qtbot.waitUntil(lambda: picker.settings_dialog is not None and picker.settings_dialog.isVisible(), timeout=WAIT_MS)
    assert picker.settings_dialog is not None
    return picker, picker.settings_dialog


def test_settings_round_trip_and_cap_the_context(
    make_chat, qtbot: QtBot, zoo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(llama_backend, "gpu_offload_supported", lambda: False)
    picker, dialog = _tiny_settings(make_chat("hi"), qtbot, zoo)
    assert dialog.context.maximum() == 2048  # the training context
    dialog.context.setValue(100_000)
    assert dialog.context.value() == 2048
    assert not dialog.gpu_layers.isEnabled() and dialog.gpu_layers.toolTip() == NO_GPU
    assert not dialog.gpu_note.isHidden() and dialog.gpu_note.text() == NO_GPU
    dialog.context.setValue(1536)
    dialog.temperature.setValue(0.3)
    dialog.top_k.setValue(0)
    dialog.seed.setText("1234")
    dialog.max_tokens.setValue(300)
    dialog.system_prompt.setPlainText("Answer in French.")
    with qtbot.waitSignal(picker.settingsSaved, timeout=WAIT_MS):
        dialog.buttons.accepted.emit()
    saved = load_model_settings(zoo / "sub" / "tiny.gguf")
    assert saved == ModelSettings(
        context_length=1536, temperature=0.3, top_k=0, seed=1234, max_tokens=300, system_prompt="Answer in French."
    )
    assert "1,536-token context" in picker.details.memory.text()
    click(qtbot, picker.settings)
    qtbot.waitUntil(
        lambda: picker.settings_dialog is not dialog and picker.settings_dialog is not None, timeout=WAIT_MS
    )
    again = picker.settings_dialog
    assert again is not None and again.values() == saved
    assert again.seed.text() == "1234" and again.top_k.text() == "Off"


def test_gpu_layers_are_offered_when_llama_cpp_can_offload(
    make_chat, qtbot: QtBot, zoo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(llama_backend, "gpu_offload_supported", lambda: True)
    _, dialog = _tiny_settings(make_chat("hi"), qtbot, zoo)
    assert dialog.gpu_layers.isEnabled() and dialog.gpu_note.isHidden()
    assert dialog.gpu_layers.maximum() == 2  # the tiny model's layers; -1 is "All layers"
    assert dialog.gpu_layers.minimum() == -1 and dialog.gpu_layers.specialValueText() == "All layers"


def test_remote_and_scripted_models_have_no_settings(make_chat, qtbot: QtBot) -> None:
    chat: Chat = make_chat("hi")
    assert not chat.window.header.settings_action.isEnabled()


def test_a_missing_last_model_opens_the_default_with_a_notice(
    qtbot: QtBot, aloop: asyncio.AbstractEventLoop, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    default = gf.write_tiny_llama(tmp_path / "default.gguf")
    monkeypatch.setenv("EMBER_DEFAULT_MODEL", str(default))
    gone = gf.write_tiny_llama(tmp_path / "gone.gguf")
    note_opened(gone)
    gone.unlink()
    window = open_window()
    qtbot.addWidget(window)
    session = asyncio.ensure_future(run_session(choose_model(None, None), window=window))
    qtbot.waitUntil(lambda: window.notice.isVisible(), timeout=WAIT_MS * 2)
    assert "gone.gguf" in window.notice.text() and "built-in model" in window.notice.text()
    assert window.header.settings_action.isEnabled()  # a local model: its settings are offered
    window.close()
    qtbot.waitUntil(session.done, timeout=WAIT_MS)


def test_header_settings_edit_the_loaded_model(
    make_chat, qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(llama_backend, "gpu_offload_supported", lambda: False)
    model = gf.write_tiny_llama(tmp_path / "m.gguf", n_ctx_train=1024)
    chat: Chat = make_chat("hi")
    load = asyncio.ensure_future(chat.models.load(local_choice(model)))
    qtbot.waitUntil(load.done, timeout=WAIT_MS * 2)
    assert load.result() is True
    chat.window.header.settings_action.trigger()
    switcher = chat.models
    qtbot.waitUntil(lambda: switcher.settings_dialog is not None, timeout=WAIT_MS)
    dialog = switcher.settings_dialog
    assert dialog is not None and dialog.context.maximum() == 1024
    dialog.temperature.setValue(0.1)
    dialog.buttons.accepted.emit()
    assert load_model_settings(model).temperature == pytest.approx(0.1)
    assert chat.controller.models.choice is not None and chat.controller.models.choice.settings is not None
    assert chat.controller.models.choice.settings.temperature == pytest.approx(0.1)


def open_header_settings(chat: Chat) -> ModelSettingsDialog:
    switcher = chat.models
    switcher.settings_dialog = None
    chat.window.header.settings_action.trigger()
    chat.qtbot.waitUntil(lambda: switcher.settings_dialog is not None, timeout=WAIT_MS)
    assert switcher.settings_dialog is not None
    return switcher.settings_dialog


def test_a_new_context_length_reloads_the_loaded_model(
    make_chat, qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(llama_backend, "gpu_offload_supported", lambda: False)
    model = gf.write_tiny_llama(tmp_path / "m.gguf")
    chat: Chat = make_chat("hi")
    load = asyncio.ensure_future(chat.models.load(local_choice(model)))
    qtbot.waitUntil(load.done, timeout=WAIT_MS * 2)
    old = chat.engine.backend
    assert isinstance(old, llama_backend.LlamaBackend) and old.n_ctx == 2048
    loading: list[str] = []
    monkeypatch.setattr(chat.window.header, "show_loading", loading.append)  # the progress indicator
    dialog = open_header_settings(chat)
    dialog.context.setValue(1024)
    dialog.buttons.accepted.emit()
    qtbot.waitUntil(lambda: chat.engine.backend is not old, timeout=WAIT_MS * 2)
    new = chat.engine.backend
    assert isinstance(new, llama_backend.LlamaBackend) and new.path == model
    assert new.n_ctx == 1024 and new.raw().n_ctx() == 1024  # in effect in llama.cpp itself
    assert loading == ["m.gguf"]
    qtbot.waitUntil(
        lambda: chat.controller.models._loading is not None and chat.controller.models._loading.done(), timeout=WAIT_MS
    )
    assert chat.controller.models.choice is not None and chat.controller.models.choice.settings is not None
    assert (
        chat.controller.models.choice.settings.context_length == 1024 and chat.controller.models.choice.notice is None
    )
    assert chat.window.header.model_label == "Tiny Llama (test) (F32)" and not chat.window.notice.isVisible()
    assert load_model_settings(model).context_length == 1024


def test_a_sampling_change_does_not_reload(
    make_chat, qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(llama_backend, "gpu_offload_supported", lambda: False)
    model = gf.write_tiny_llama(tmp_path / "m.gguf")
    chat: Chat = make_chat("hi")
    load = asyncio.ensure_future(chat.models.load(local_choice(model)))
    qtbot.waitUntil(load.done, timeout=WAIT_MS * 2)
    before, task = chat.engine.backend, chat.controller.models._loading
    loading: list[str] = []
    monkeypatch.setattr(chat.window.header, "show_loading", loading.append)
    dialog = open_header_settings(chat)
    dialog.temperature.setValue(0.25)
    dialog.system_prompt.setPlainText("Be brief.")
    dialog.buttons.accepted.emit()
    # A task started by the save would have taken its first step before this one ends.
    after = asyncio.ensure_future(asyncio.sleep(0))
    qtbot.waitUntil(after.done, timeout=WAIT_MS)
    assert loading == [] and chat.engine.backend is before and chat.controller.models._loading is task
    assert chat.controller.models.choice is not None and chat.controller.models.choice.settings is not None
    assert chat.controller.models.choice.settings.temperature == pytest.approx(0.25)


def test_after_a_failed_load_the_notices_choose_model_button_opens_the_picker(
    make_chat, qtbot: QtBot, tmp_path: Path
) -> None:
    chat: Chat = make_chat("hi")
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a model at all" * 64)
    loading = asyncio.ensure_future(chat.models.load(local_choice(broken)))
    qtbot.waitUntil(loading.done, timeout=WAIT_MS)
    assert loading.result() is False
    notice = chat.window.notice
    assert notice.isVisible() and "Couldn't load broken.gguf" in notice.label.text()
    assert chat.models.picker is None
    click(qtbot, notice.choose_button)
    qtbot.waitUntil(lambda: chat.models.picker is not None and chat.models.picker.isVisible(), timeout=WAIT_MS)


def test_a_base_model_says_so_once_loaded_and_in_the_picker(make_chat, qtbot: QtBot, tmp_path: Path) -> None:
    base = gf.write_tiny_llama(tmp_path / "base.gguf", None, (), name="Tiny base")
    chat: Chat = make_chat("hi")
    load = asyncio.ensure_future(chat.models.load(local_choice(base)))
    qtbot.waitUntil(load.done, timeout=WAIT_MS * 2)
    assert load.result() and chat.window.notice.isVisible()
    assert chat.window.notice.text() == BASE_MODEL_NOTE
    picker = open_picker(chat)  # the loaded file is in the library now, as an opened file
    item = picker.table.topLevelItem(row_named(picker, "base.gguf"))
    assert item is not None and item.text(0).startswith("base.gguf\nLlama · ")
    assert item.text(0).endswith(" · base model · loaded")
    assert BASE_MODEL_NOTE in item.toolTip(0)
    picker.close()
    # A chat model afterwards: the notice goes with the model it was about.
    load = asyncio.ensure_future(chat.models.load(local_choice(gf.write_tiny_llama(tmp_path / "chat.gguf"))))
    qtbot.waitUntil(load.done, timeout=WAIT_MS * 2)
    assert load.result() and not chat.window.notice.isVisible()


def test_the_gpu_device_is_chosen_in_the_settings_from_the_devices_seen(
    make_chat, qtbot: QtBot, zoo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.llama import gpu_modules
    from engine.llama.gpu_pick import GpuDevice, choose

    lavapipe = GpuDevice("Vulkan", 0, "llvmpipe (LLVM 15.0.6, 256 bits)", "software", 0, 2 << 30)
    monkeypatch.setattr(llama_backend, "gpu_offload_supported", lambda: False)
    monkeypatch.setattr(gpu_modules, "loaded", lambda: choose([lavapipe]))
    picker, dialog = _tiny_settings(make_chat("hi"), qtbot, zoo)
    assert dialog.gpu_where.text().startswith("GPU: none — only a software Vulkan device (llvmpipe")
    assert dialog.gpu_device.currentText() == "Automatic (the best GPU)"
    dialog.gpu_device.setCurrentIndex(dialog.gpu_device.findData("0"))
    assert "llvmpipe" in dialog.gpu_device.currentText()
    with qtbot.waitSignal(picker.settingsSaved, timeout=WAIT_MS):
        dialog.buttons.accepted.emit()
    assert load_model_settings(zoo / "sub" / "tiny.gguf").gpu_device == "0"


def test_picker_rows_read_in_words_and_skipped_files_are_listed_greyed(make_chat, qtbot: QtBot, zoo: Path) -> None:
    (zoo / "renamed.gguf").write_bytes(b"%PDF-1.7\n" + b"\0" * 2000)
    (zoo / "error-page.gguf").write_text("<!DOCTYPE html><html><body>Not found</body></html>")
    chat: Chat = make_chat("hi")
    picker = add_zoo(chat, zoo)
    texts = [picker.table.topLevelItem(i).text(0) for i in range(picker.table.topLevelItemCount())]  # type: ignore[union-attr]
    assert texts[0].startswith("SmolLM2") and "\nLlama · 135M · Q4_1 · " in texts[0] and "8K context" in texts[0]
    cut = picker.rows[row_named(picker, "cut.gguf")]
    assert cut.line.startswith("Incomplete download: ") and "byte" not in cut.line
    pdf = picker.rows[row_named(picker, "renamed.gguf")]
    page = picker.rows[row_named(picker, "error-page.gguf")]
    assert pdf.skipped and pdf.line == "Not a GGUF model (this is a PDF)"
    assert page.skipped and page.line == "Not a GGUF model (this is a web page)"
    for index in (row_named(picker, "renamed.gguf"), row_named(picker, "cut.gguf")):
        picker.select_row(index)
        assert not picker.load.isEnabled()
    item = picker.table.topLevelItem(row_named(picker, "renamed.gguf"))
    assert item is not None and item.foreground(0).color() != picker.palette().text().color()  # greyed
    picker.select_row(row_named(picker, TINY))
    assert picker.load.isEnabled() and "All metadata" not in picker.details.browser.toPlainText()
    picker.details.expander.click()  # the dump waits behind Details
    assert "All metadata" in picker.details.browser.toPlainText()
