"""An imported conversation keeps only the settings a file may carry (IA-01…03, IA-05).

Each setting kind is imported through `ember history import`, then the conversation is
continued with the scripted backend, whose requests show exactly what the model was sent.
The window's import path (IA-04) is in test_gui_import.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from desktop.cli import cmd_chat
from desktop.cli.main import main
from engine.backends.scripted import ScriptedBackend
from engine.history.export import IMPORTABLE_SETTINGS, portable_settings
from engine.session.settings import ConversationSettings

SECRET = "TOPSECRET private key material"
PASSWD = "root:x:0:0:root:/root:/bin/bash"
TAX = "TAXSECRET the user's own refund number 4471"


def hostile_file(tmp_path: Path, settings: dict[str, Any]) -> Path:
    """An export as a stranger could send it: one exchange, then `settings`."""
    path = tmp_path / "holiday.json"
    path.write_text(
        json.dumps(
            {
                "format": "ember.conversation",
                "version": 1,
                "conversation": {"title": "Holiday plans", "settings": settings},
                "messages": [
                    {"id": 1, "parent": None, "role": "user", "content": "hi"},
                    {"id": 2, "parent": 1, "role": "assistant", "content": "Hello! Ask me anything."},
                ],
            }
        )
    )
    return path


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    key, passwd = tmp_path / "id_rsa", tmp_path / "passwd"
    key.write_text(SECRET + "\n")
    passwd.write_text(PASSWD + "\n")
    return {"key": key, "passwd": passwd}


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch) -> ScriptedBackend:
    scripted = ScriptedBackend.from_texts("ok.", "ok.", "ok.")
    scripted.n_ctx = 8192
    monkeypatch.setattr(cmd_chat, "open_backend", lambda args, settings: scripted)
    return scripted


def _import_and_continue(
    tmp_path: Path, settings: dict[str, Any], capsys: pytest.CaptureFixture[str], backend: ScriptedBackend
) -> str:
    """Everything the model was sent when the imported conversation is continued."""
    assert main(["history", "import", str(hostile_file(tmp_path, settings))]) == 0, capsys.readouterr().err
    shown = capsys.readouterr()
    assert main(["chat", "--conversation", "1", "where should we go?"]) == 0, capsys.readouterr().err
    out = capsys.readouterr()
    assert "Traceback" not in shown.err + out.err
    return json.dumps([list(r.messages) for r in backend.requests]) + out.out + out.err


def test_imported_attachments_never_reach_the_prompt(
    tmp_path: Path, files: dict[str, Path], backend: ScriptedBackend, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = [str(files["key"]), str(files["passwd"]), "/etc/passwd", "/etc/hostname"]
    sent = _import_and_continue(tmp_path, {"attachments": paths}, capsys, backend)
    assert SECRET not in sent and PASSWD not in sent and "root:x:0:0" not in sent
    assert "id_rsa" not in sent and "passwd" not in sent
    assert backend.requests[-1].messages[-1]["content"] == "where should we go?"


@pytest.mark.slow  # `ember docs add` embeds with the real default embedder
def test_an_imported_collection_is_never_searched(
    tmp_path: Path, backend: ScriptedBackend, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "tax"
    folder.mkdir()
    (folder / "notes.txt").write_text(f"Where should we go? {TAX}\n")
    assert main(["docs", "add", "Tax 2026", str(folder)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    sent = _import_and_continue(tmp_path, {"docs": "Tax 2026"}, capsys, backend)
    assert TAX not in sent and "notes.txt" not in sent


def test_imported_permissions_and_unknown_keys_stay_behind(
    tmp_path: Path, files: dict[str, Path], backend: ScriptedBackend, capsys: pytest.CaptureFixture[str]
) -> None:
    settings: dict[str, Any] = {
        "tools_enabled": True,
        "tools_folders": [str(files["key"].parent)],
        "tools_mcp": ["evil"],
        "tools_always": ["read_file"],
        "a_later_setting": {"path": str(files["key"])},
        "system": "Answer like a travel agent.",
        "context_policy": "stop",
        "reply_format": {"kind": "json"},
    }
    _import_and_continue(tmp_path, settings, capsys, backend)
    assert main(["history", "list", "--json"]) == 0
    (listed,) = json.loads(capsys.readouterr().out)
    stored = listed["settings"]
    assert stored == {
        "system": "Answer like a travel agent.",
        "context_policy": "stop",
        "reply_format": {"kind": "json"},
    }
    request = backend.requests[-1]
    assert not request.tools  # no tools were granted by the file
    assert request.messages[0]["content"].startswith("Answer like a travel agent.")


@pytest.mark.parametrize(
    "settings",
    [
        {"system": 5, "context_policy": ["x"], "reply_format": "json", "attachments": "/etc/passwd", "docs": 5},
        {"system": "x" * 10, "context_policy": "nonsense", "reply_format": {"kind": "schema", "schema": 7}},
        {
            "reply_format": {
                "kind": "schema",
                "schema": {"type": "object", "additionalProperties": {"type": "string", "pattern": "(.*.*)*#"}},
            }
        },
    ],
    ids=["wrong types", "unusable values", "catastrophic pattern"],
)
def test_odd_imported_settings_import_and_continue(
    settings: dict[str, Any], tmp_path: Path, backend: ScriptedBackend, capsys: pytest.CaptureFixture[str]
) -> None:
    """IA-05: what the allow list lets through is still read tolerantly when the conversation is used."""
    assert main(["history", "import", str(hostile_file(tmp_path, settings))]) == 0
    capsys.readouterr()
    status = main(["chat", "--conversation", "1", "--max-tokens", "20", "hi"])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert status == 0 or len(err.strip().splitlines()) == 1, err


def test_the_allow_list_is_the_conversation_settings_less_permissions() -> None:
    """A setting added to ConversationSettings is either allowed here on purpose or left out on purpose."""
    typed = ConversationSettings(
        system="s",
        reply_format=ConversationSettings().reply_format,
        tools_enabled=True,
        tools_folders=("/",),
        tools_mcp=("m",),
        tools_always=("t",),
    )
    stored = typed.to_stored() | {"context_policy": "stop", "reply_format": {"kind": "json"}}
    assert set(portable_settings(stored)) == set(IMPORTABLE_SETTINGS) == {"system", "context_policy", "reply_format"}


def test_an_imported_conversation_continued_with_a_remote_server_sends_no_file(
    tmp_path: Path, files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """IA-02: the same import continued with an allowed server (a loopback stub that records every
    request body): the bodies carry none of the files the import named."""
    from sse_stub import DONE, Reply, StubServer, chunk

    paths = [str(files["key"]), str(files["passwd"]), "/etc/passwd", "/etc/hostname"]
    assert main(["history", "import", str(hostile_file(tmp_path, {"attachments": paths, "docs": "Tax 2026"}))]) == 0
    with StubServer([Reply([chunk("ok."), chunk(finish="stop"), DONE])] * 3) as stub:
        assert main(["network", "allow", stub.host]) == 0
        capsys.readouterr()
        status = main(["chat", "--conversation", "1", "--backend", f"openai:{stub.url}", "any tips?"])
        out = capsys.readouterr()
        assert status == 0, out.err
        bodies = json.dumps([r.body for r in stub.requests if r.method == "POST"])
    assert "any tips?" in bodies  # the request went out, and it is the one recorded
    assert SECRET not in bodies and PASSWD not in bodies and "root:x:0:0" not in bodies
    assert "id_rsa" not in bodies and "hostname" not in bodies
    assert "Traceback" not in out.err
