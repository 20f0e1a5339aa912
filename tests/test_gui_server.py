"""Add server…: fetch a server's models, save one, load it like a file, chat; keys stay private."""

from __future__ import annotations

import asyncio
import logging
import stat
from collections.abc import Iterator
from pathlib import Path

import gguf_factory as gf
import pytest
from gui_helpers import WAIT_MS, Chat, click, open_picker, widget_texts
from pytestqt.qtbot import QtBot
from sse_stub import DONE, Reply, StubServer, chunk, free_port, json_body

from desktop.core.model_choice import choose_model, remote_choice
from desktop.qt.app import open_window, run_session
from desktop.qt.models.server_dialog import ServerDialog
from engine.api.factory import BackendSpec
from models.library.remote_keys import key_id, keys_file, load_api_key, save_api_key
from models.library.scan import RemoteServer, library_file, load_library_state, save_library_state

pytest_plugins = ["gui_helpers"]

SECRET = "sk-test-Zq81SECRETkey"
MODELS = Reply(
    json_body({"object": "list", "data": [{"id": "stub-model"}, {"id": "other-model"}]}),
    content_type="application/json",
)


def chat_reply(*texts: str) -> Reply:
    return Reply([*(chunk(t) for t in texts), chunk(finish="stop"), DONE])


@pytest.fixture
def log_file(ember_home: Path) -> Iterator[Path]:
    """Everything logged during the test (DEBUG and up), as the app's log file would hold it."""
    path = ember_home / "logs" / "ember.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    yield path
    root.removeHandler(handler)
    root.setLevel(old_level)
    handler.close()


def server_dialog(chat: Chat) -> ServerDialog:
    picker = open_picker(chat)
    click(chat.qtbot, picker.add_server)
    chat.qtbot.waitUntil(lambda: picker.server_dialog is not None and picker.server_dialog.isVisible(), timeout=WAIT_MS)
    assert picker.server_dialog is not None
    return picker.server_dialog


def test_add_server_fetch_save_select_and_chat(make_chat, qtbot: QtBot, log_file: Path) -> None:
    chat: Chat = make_chat("local answer")
    with StubServer([MODELS, chat_reply("Hello ", "from the server.")]) as stub:
        dialog = server_dialog(chat)
        dialog.url.setText(stub.url)
        dialog.api_key.setText(SECRET)
        click(qtbot, dialog.fetch)
        qtbot.waitUntil(lambda: dialog.model.count() == 2, timeout=WAIT_MS)
        assert "2 model(s)" in dialog.status.text()
        dialog.model.setCurrentIndex(0)
        picker = chat.models.picker
        assert picker is not None
        with qtbot.waitSignal(picker.scanned, timeout=WAIT_MS):
            dialog.buttons.accepted.emit()
        row = picker.selected()
        assert (
            row is not None and row.name == "stub-model" and row.line.startswith("Runs on ") and row.source == "Server"
        )
        assert "saved (not shown)" in picker.details.browser.toPlainText()
        click(qtbot, picker.load)
        qtbot.waitUntil(
            lambda: chat.controller.models.model is not None and chat.controller.models.model.device == "Remote",
            timeout=WAIT_MS,
        )
        assert chat.window.header.model_label == f"stub-model at {stub.host}"
        chat.type_and_send("hi")
        assert chat.wait_reply_finished().answer_text() == "Hello from the server."
        requests = list(stub.requests)
    listing, completion = requests
    assert (listing.method, listing.path) == ("GET", "/v1/models")
    assert listing.headers["Authorization"] == f"Bearer {SECRET}"
    assert completion.path == "/v1/chat/completions" and completion.body["model"] == "stub-model"
    assert completion.headers["Authorization"] == f"Bearer {SECRET}"
    assert load_library_state().remote_servers == (RemoteServer(f"stub-model at {stub.host}", stub.url, "stub-model"),)
    assert SECRET not in library_file().read_text()
    assert SECRET not in log_file.read_text() and "stub-model" in log_file.read_text()
    assert SECRET not in "\n".join(widget_texts(chat.window))
    assert load_api_key(stub.url) == SECRET
    assert stat.S_IMODE(keys_file().stat().st_mode) == 0o600


def test_a_failed_fetch_is_readable_and_nothing_is_saved(make_chat, qtbot: QtBot) -> None:
    chat: Chat = make_chat("hi")
    dialog = server_dialog(chat)
    dialog.url.setText(f"http://127.0.0.1:{free_port()}/v1")
    click(qtbot, dialog.fetch)
    qtbot.waitUntil(lambda: "Could not list the models" in dialog.status.text(), timeout=WAIT_MS)
    assert dialog.fetch.isEnabled() and dialog.model.count() == 0
    dialog.url.setText("ftp://example.invalid")
    click(qtbot, dialog.fetch)
    qtbot.waitUntil(lambda: "bad server URL" in dialog.status.text(), timeout=WAIT_MS)  # no network needed
    dialog.buttons.accepted.emit()
    assert dialog.isVisible() and load_library_state().remote_servers == ()
    dialog.url.setText("http://127.0.0.1:1/v1")
    dialog.buttons.accepted.emit()
    assert "Choose a model first" in dialog.status.text()
    assert not keys_file().exists()


def test_listing_saved_servers_contacts_nobody(make_chat, qtbot: QtBot) -> None:
    with StubServer([]) as stub:
        save_library_state(load_library_state().with_remote_server(RemoteServer("s", stub.url, "m")))
        chat: Chat = make_chat("hi")
        picker = open_picker(chat)
        picker.select_row(len(picker.rows) - 1)
        assert picker.selected() is not None and picker.selected().source == "Server"  # type: ignore[union-attr]
        assert not picker.settings.isEnabled()  # a server keeps its own settings
        assert stub.requests == []


def test_an_empty_key_field_keeps_the_saved_key(make_chat, qtbot: QtBot) -> None:
    chat: Chat = make_chat("hi")
    with StubServer([MODELS, MODELS]) as stub:
        save_api_key(stub.url, SECRET)
        dialog = server_dialog(chat)
        dialog.url.setText(stub.url + "/")
        click(qtbot, dialog.fetch)
        qtbot.waitUntil(lambda: dialog.model.count() == 2, timeout=WAIT_MS)
        dialog.model.setCurrentIndex(1)
        dialog.buttons.accepted.emit()
        assert stub.requests[0].headers["Authorization"] == f"Bearer {SECRET}"
    assert load_api_key(stub.url) == SECRET
    assert [s.model for s in load_library_state().remote_servers] == ["other-model"]


def test_remote_keys_are_private_and_forgettable(tmp_path: Path) -> None:
    assert load_api_key("http://h/v1") is None
    save_api_key("http://h/v1/", "k1")
    save_api_key("http://other/v1", "k2")
    assert key_id(" http://h/v1// ") == "http://h/v1"
    assert load_api_key("http://h/v1") == "k1" and load_api_key("http://other/v1") == "k2"
    assert stat.S_IMODE(keys_file().stat().st_mode) == 0o600
    save_api_key("http://h/v1", None)
    assert load_api_key("http://h/v1") is None and load_api_key("http://other/v1") == "k2"
    assert [p.name for p in keys_file().parent.iterdir() if p.name.endswith(".tmp")] == []


def test_a_used_server_comes_back_at_start_and_is_contacted_only_once_used(
    make_chat, qtbot: QtBot, aloop: asyncio.AbstractEventLoop
) -> None:
    with StubServer([chat_reply("Back ", "again.")]) as stub:
        server = RemoteServer("lab", stub.url, "stub-model")
        save_library_state(load_library_state().with_remote_server(server))
        save_api_key(stub.url, SECRET)
        chat: Chat = make_chat("local answer")
        load = asyncio.ensure_future(chat.models.load(remote_choice(server)))
        qtbot.waitUntil(load.done, timeout=WAIT_MS)
        assert load.result() is True and load_library_state().last_used_server == server.key
        choice = choose_model(None, None)  # the next start
        assert (choice.spec, choice.model_name, choice.notice) == (BackendSpec("openai", stub.url), "stub-model", None)
        assert stub.requests == []  # choosing it at start contacts nobody
        window = open_window()
        qtbot.addWidget(window)
        session = asyncio.ensure_future(run_session(choice, prompt="hi again", window=window))
        qtbot.waitUntil(lambda: (r := window.last_reply()) is not None and r.finished, timeout=WAIT_MS)
        assert window.header.model_label == f"stub-model at {stub.host}"
        assert window.last_reply().answer_text() == "Back again."  # type: ignore[union-attr]
        window.close()
        qtbot.waitUntil(session.done, timeout=WAIT_MS)
        (completion,) = stub.requests
    assert completion.path == "/v1/chat/completions" and completion.headers["Authorization"] == f"Bearer {SECRET}"
    assert SECRET not in library_file().read_text()


def test_a_removed_last_server_opens_the_default_with_a_notice(
    qtbot: QtBot, aloop: asyncio.AbstractEventLoop, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMBER_DEFAULT_MODEL", str(gf.write_tiny_llama(tmp_path / "default.gguf")))
    with StubServer([]) as stub:
        server = RemoteServer("lab", stub.url, "stub-model")
        save_library_state(load_library_state().with_remote_server(server).with_server_used(server))
        save_library_state(load_library_state().without_remote_server("lab"))
        choice = choose_model(None, None)
        assert choice.spec.kind == "llama" and choice.path is None  # the built-in model
        window = open_window()
        qtbot.addWidget(window)
        session = asyncio.ensure_future(run_session(choice, window=window))
        qtbot.waitUntil(lambda: window.notice.isVisible(), timeout=WAIT_MS * 2)
        assert "no longer saved" in window.notice.text() and f"stub-model at {stub.url}" in window.notice.text()
        assert "built-in model" in window.notice.text()
        window.close()
        qtbot.waitUntil(session.done, timeout=WAIT_MS)
        assert stub.requests == []
