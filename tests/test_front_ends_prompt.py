"""The three front ends send the same prompt for the same conversation (issue #36).

"The same conversation": the system prompt "Be brief.", one earlier exchange ("Hi" answered
"Hello!"), then "Name three colors.", no tools, no documents, no images. The window (its
controller, no Qt) and `ember chat` (in-process, its second call with `-c`) reach it by two
turns in their history; `ember serve` gets it as one request's messages. What each hands the
backend for the last question (`Request.messages`) is compared.

The one deliberate difference: a tool-less turn in the window or the CLI folds the no-tools
line into the system message (small models otherwise write tool-call markup), while the API
adds nothing, since there the request is the prompt (docs/DESIGN.md, "The local API").
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from serve_helpers import serve
from test_gui_controller import FakeView

from desktop.cli import cmd_chat
from desktop.core.controller import ChatController
from engine.backends.base import Backend, Message
from engine.backends.scripted import ScriptedBackend
from engine.runtime import Engine
from engine.turns.runner import NO_TOOLS_LINE, sent_messages

SYSTEM = "Be brief."
CONVERSATION: tuple[Message, ...] = (
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello!"},
    {"role": "user", "content": "Name three colors."},
)


def _two_turns() -> ScriptedBackend:
    return ScriptedBackend([["Hello!"], ["Red, green, blue."]])


def _window() -> tuple[Message, ...]:
    backend = _two_turns()

    async def main() -> None:
        controller = ChatController(Engine(backend), FakeView())
        controller.session.state.update_settings(system=SYSTEM)  # the conversation's own system prompt
        assert await controller.send("Hi")
        assert await controller.send("Name three colors.")
        await controller.aclose()

    asyncio.run(main())
    return backend.requests[-1].messages


def _cli(monkeypatch: pytest.MonkeyPatch) -> tuple[Message, ...]:
    backends: list[ScriptedBackend] = [ScriptedBackend([["Hello!"]]), ScriptedBackend([["Red, green, blue."]])]
    used: list[ScriptedBackend] = []

    def open_backend(args: argparse.Namespace, settings: Any) -> Backend:
        used.append(backends.pop(0))
        return used[-1]

    monkeypatch.setattr(cmd_chat, "open_backend", open_backend)  # the model: a script we can read back
    parser = argparse.ArgumentParser()
    cmd_chat.register(parser.add_subparsers())
    assert cmd_chat.run(parser.parse_args(["chat", "--system", SYSTEM, "Hi"])) == 0
    assert cmd_chat.run(parser.parse_args(["chat", "-c", "Name three colors."])) == 0
    return used[-1].requests[-1].messages


def _serve() -> tuple[Message, ...]:
    backend = ScriptedBackend([["Red, green, blue."]])
    served = serve(backend)
    try:
        response = httpx.post(f"{served.url}/chat/completions", json={"messages": list(CONVERSATION)}, timeout=20)
    finally:
        served.close()
    assert response.status_code == 200, response.text
    [request] = backend.requests
    return request.messages


def test_the_three_front_ends_send_the_same_prompt(ember_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    window, cli, api = _window(), _cli(monkeypatch), _serve()
    assert api == CONVERSATION  # the API adds nothing
    assert window == cli  # the window and the CLI: one session, one prompt
    # The deliberate difference: only the no-tools line, folded into the system message.
    assert window == sent_messages(api, None)
    assert window[0] == {"role": "system", "content": window[0]["content"]}
    assert SYSTEM in str(window[0]["content"]) and NO_TOOLS_LINE in str(window[0]["content"])
    assert window[1:] == api[1:]
