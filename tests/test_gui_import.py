"""IA-04: a conversation imported in the window brings no files into the next prompt."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

from gui_helpers import WAIT_MS, Chat

from engine.backends.scripted import ScriptedBackend

pytest_plugins = ["gui_helpers"]
MakeChat = Callable[..., Chat]
SECRET = "TOPSECRET private key material"


def test_an_imported_conversation_sends_no_attached_file(make_chat: MakeChat, tmp_path: Path) -> None:
    key = tmp_path / "id_rsa"
    key.write_text(SECRET + "\n")
    export = tmp_path / "holiday.json"
    export.write_text(
        json.dumps(
            {
                "format": "ember.conversation",
                "version": 1,
                "conversation": {
                    "title": "Holiday plans",
                    "settings": {"attachments": [str(key), "/etc/passwd"], "docs": "Tax 2026"},
                },
                "messages": [
                    {"id": 1, "parent": None, "role": "user", "content": "hi"},
                    {"id": 2, "parent": 1, "role": "assistant", "content": "Hello! Ask me anything."},
                ],
            }
        )
    )
    backend = ScriptedBackend.from_texts("ok.")
    backend.n_ctx = 8192
    chat = make_chat(backend=backend)
    button = chat.window.documents_button
    history = chat.controller.history
    assert history is not None
    conversation = history.import_file(export)  # what the sidebar's Import does, on its I/O thread
    opened = asyncio.ensure_future(chat.controller.open_conversation(conversation.id))
    chat.qtbot.waitUntil(opened.done, timeout=WAIT_MS)
    assert "Attached" not in button.toolTip() and "file" not in button.text()
    chat.type_and_send("where should we go?")
    chat.qtbot.waitUntil(lambda: bool(backend.requests), timeout=WAIT_MS)
    chat.wait_reply_finished()
    sent = json.dumps(list(backend.requests[0].messages))
    assert SECRET not in sent and "root:x:0:0" not in sent and "id_rsa" not in sent
