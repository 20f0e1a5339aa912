"""`ember chat` with a counting backend: the context policy, the refusal, tools and `-c` together.

The backend is a ScriptedBackend with a context size (it counts words, like a model counts
tokens), put in place of the loaded model, so the whole command runs as a user runs it.
"""

from __future__ import annotations

import argparse
import json

import pytest

from desktop.cli import cmd_chat
from desktop.cli.cmd_history import open_store
from desktop.cli.main import main
from engine.backends.base import Backend
from engine.backends.scripted import ScriptedBackend
from engine.history.store import HistoryStore
from engine.session.settings import TurnSettings
from engine.turns.context_policy import SETTINGS_KEY

N_CTX = 160
CALC = '<tool_call>{"name": "calculator", "arguments": {"expression": "6 * 7"}}</tool_call>'


class Opened:
    """The backends `ember chat` opened (for inspection) and the replies the next one gives."""

    def __init__(self) -> None:
        self.backends: list[ScriptedBackend] = []
        self.next_replies: list[str] = []

    def __getitem__(self, index: int) -> ScriptedBackend:
        return self.backends[index]

    def open(self, _args: argparse.Namespace, _settings: TurnSettings) -> Backend:
        replies, self.next_replies = self.next_replies or ["An answer of some words."], []
        backend = ScriptedBackend.from_texts(*replies)
        backend.n_ctx = N_CTX
        self.backends.append(backend)
        return backend


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> Opened:
    """Each `ember chat` gets a counting scripted backend instead of the model."""
    result = Opened()
    monkeypatch.setattr(cmd_chat, "open_backend", result.open)
    return result


def store() -> HistoryStore:
    return open_store()


def ask(*args: str) -> int:
    return main(["chat", "--ctx", str(N_CTX), "--max-tokens", "8", *args])


def test_a_message_too_long_for_the_context_is_refused_before_it_is_stored(
    opened: Opened, capsys: pytest.CaptureFixture[str]
) -> None:
    assert ask("word " * 300) == cmd_chat.EXIT_TURN_ERROR
    err = capsys.readouterr().err
    assert err.startswith("ember: this message needs 300 tokens") and err.count("\n") == 1  # one line
    assert opened[0].requests == []  # never sent
    with store() as s:
        assert s.conversations() == []  # never stored


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
def test_a_long_conversation_is_cut_to_fit_and_continues(opened: Opened, capsys: pytest.CaptureFixture[str]) -> None:
    for i in range(12):
        args = ("-c",) if i else ()
        assert ask(*args, f"Question {i}: " + "tell me more about it " * 3) == 0
    err = capsys.readouterr().err
    assert "earlier messages are outside the model's context (truncate-middle)" in err
    last = opened[-1].requests[-1]
    assert opened[-1].count_prompt_tokens(last.messages) <= N_CTX - 8
    users = [m["content"] for m in last.messages if m["role"] == "user"]
    assert users[0].startswith("Question 0:") and users[-1].startswith("Question 11:")  # first exchange kept
    assert len(users) < 12
    with store() as s:
        (conv,) = s.conversations()
        assert len([m for m in s.messages(conv.id) if m.role == "user"]) == 12  # nothing dropped from history


def test_the_policy_given_is_remembered_and_stop_refuses_a_full_conversation(
    opened: Opened, capsys: pytest.CaptureFixture[str]
) -> None:
    assert ask("--context-policy", "stop", "Question 0: " + "tell me more " * 3) == 0
    with store() as s:
        (conv,) = s.conversations()
        assert s.conversation(conv.id).settings[SETTINGS_KEY] == "stop"
    status = 0
    for i in range(1, 30):
        status = ask("-c", f"Question {i}: " + "tell me more " * 3)
        if status:
            break
    assert status == cmd_chat.EXIT_TURN_ERROR
    assert "no longer fits" in capsys.readouterr().err
    sent = [r for b in opened.backends for r in b.requests]
    assert all(
        len(r.messages) == len(sent[-1].messages) - 2 * (len(sent) - 1 - k) for k, r in enumerate(sent)
    )  # under stop nothing was ever cut


def test_tools_run_on_the_fitted_conversation(opened: Opened, capsys: pytest.CaptureFixture[str]) -> None:
    for i in range(8):
        args = ("-c",) if i else ()
        assert ask(*args, f"Question {i}: " + "tell me more about it " * 3) == 0
    opened.next_replies = [CALC, "It is 42."]
    assert ask("-c", "--tools", "builtin", "--yes", "--events", "what is 6*7?") == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert [e["type"] for e in out][-4:] == ["tool_call", "tool_result", "content", "done"]
    backend = opened[-1]
    assert len(backend.requests) == 2
    for request in backend.requests:
        assert backend.count_prompt_tokens(request.messages) <= N_CTX - 8
    users = [m["content"] for m in backend.requests[0].messages if m["role"] == "user"]
    assert len(users) < 9 and users[-1] == "what is 6*7?"
