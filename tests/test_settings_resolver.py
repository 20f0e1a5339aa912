"""One settings resolver and one set of defaults, the same for `ember chat` and the window."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from desktop.cli import cmd_chat
from desktop.cli.common import run_settings
from desktop.cli.main import build_parser, main
from desktop.core.controller import ChatController
from desktop.core.model_choice import local_choice
from engine.backends.base import Request, Sampling
from engine.backends.scripted import ScriptedBackend
from engine.errors import ConfigError
from engine.runtime import Engine
from engine.session.settings import Overrides, resolve
from models.library.settings import ModelSettings, save_model_settings
from tests.test_gui_controller import FakeView

SAVED = ModelSettings(
    temperature=0.3,
    top_p=0.8,
    top_k=12,
    min_p=0.1,
    repeat_penalty=1.3,
    seed=7,
    max_tokens=99,
    system_prompt="Be terse.",
    context_length=2048,
)


def test_one_set_of_defaults() -> None:
    settings = resolve()
    assert settings.sampling == Sampling()  # the engine's defaults are the saved settings' defaults
    assert Sampling().repeat_penalty == ModelSettings().repeat_penalty == 1.0
    assert settings.max_tokens == ModelSettings().context_length  # no limit: up to the context


def test_flags_override_only_what_they_name() -> None:
    s = resolve(SAVED, Overrides(temperature=0.0, max_tokens=5, system_prompt=""))
    assert (s.sampling.temperature, s.sampling.top_k, s.sampling.repeat_penalty, s.sampling.seed) == (0.0, 12, 1.3, 7)
    assert (s.max_tokens, s.system_prompt, s.model.context_length) == (5, "", 2048)
    with pytest.raises(ConfigError, match="temperature"):
        resolve(SAVED, Overrides(temperature=-1.0))


def _sent_by_cli(model: Path, monkeypatch: pytest.MonkeyPatch) -> Request:
    backend = ScriptedBackend.from_texts("Hi.")
    monkeypatch.setattr(cmd_chat, "open_backend", lambda args, settings: backend)
    assert main(["chat", "--model", str(model), "--no-history", "hello"]) == 0
    return backend.requests[0]


def _sent_by_gui(model: Path) -> Request:
    backend = ScriptedBackend.from_texts("Hi.")

    async def turn() -> None:
        controller = ChatController(Engine(backend), FakeView())
        controller.models.choice = local_choice(model)  # as the window holds the loaded model's choice
        await controller.send("hello")
        await controller.aclose()

    asyncio.run(turn())
    return backend.requests[0]


def test_the_cli_and_the_window_send_the_same_request(
    tmp_path: Path, ember_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    save_model_settings(model, SAVED)
    cli, gui = _sent_by_cli(model, monkeypatch), _sent_by_gui(model)
    assert cli.sampling == gui.sampling == resolve(SAVED).sampling
    assert cli.max_tokens == gui.max_tokens == 99
    assert cli.messages == gui.messages and "Be terse." in str(cli.messages[0]["content"])
    args = build_parser().parse_args(["chat", "--model", str(model), "--ctx", "512", "hi"])
    assert run_settings(args).model.context_length == 512 and args.ctx == 512  # args are read, never rewritten
