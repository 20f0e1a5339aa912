"""The request is the prompt (issue #40): over the API, Ember adds nothing to a tool-less request's
messages, and fields the client leaves out take OpenAI's neutral defaults, not the model's
recommended settings (those on request: `"ember": {"model_defaults": true}` or `--model-defaults`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import httpx
import pytest
from serve_helpers import Served, serve

from desktop.cli.cmd_serve import register
from engine.backends.base import Request, Sampling
from engine.backends.scripted import ScriptedBackend
from engine.llama.llama_decode import device_samplable
from engine.session.settings import resolve
from engine.turns.runner import NO_TOOLS_LINE
from models.library.settings import ModelSettings

# The built-in model's recommended settings (models/library/recommended.py SMALL_MODEL_DEFAULTS).
RECOMMENDED = resolve(ModelSettings(temperature=0.7, repeat_penalty=1.15, max_tokens=1024))
NEUTRAL = Sampling(temperature=1.0, top_p=1.0, top_k=0, min_p=0.0, repeat_penalty=1.0, seed=None)
CONTEXT = 2048
COLORS: list[Any] = [{"role": "user", "content": "Name three colors."}]


def _sent(served: list[Served], body: dict[str, Any], *, model_defaults: bool = False) -> Request:
    """The request the model received for `body`, served with the built-in model's recommended settings."""
    backend = ScriptedBackend([["Red, green, blue."]], n_ctx=CONTEXT)
    s = serve(backend, settings=RECOMMENDED, model_defaults=model_defaults)
    served.append(s)
    response = httpx.post(f"{s.url}/chat/completions", json=body, timeout=20)
    assert response.status_code == 200, response.text
    [request] = backend.requests
    return request


def test_a_request_without_tools_reaches_the_model_as_sent(served: list[Served]) -> None:
    request = _sent(served, {"messages": COLORS})
    assert request.messages == tuple(COLORS)  # no system line: the template's default system prompt stays
    system: list[Any] = [{"role": "system", "content": "Be brief."}, *COLORS]
    assert _sent(served, {"messages": system}).messages == tuple(system)


def test_fields_left_out_take_openais_neutral_defaults_and_the_contexts_room(served: list[Served]) -> None:
    request = _sent(served, {"messages": COLORS})
    assert request.sampling == NEUTRAL  # temperature 1, top_p 1, no top_k/min_p, no repeat penalty
    assert request.max_tokens == CONTEXT  # no 1,024 cap: the backend stops at the context's room


def test_temperature_0_is_plain_greedy_decoding(served: list[Served]) -> None:
    request = _sent(served, {"messages": COLORS, "temperature": 0, "max_tokens": 40})
    assert request.sampling.temperature == 0 and request.sampling.repeat_penalty == 1.0
    assert request.max_tokens == 40
    assert device_samplable(request.sampling, None)  # llama.cpp's greedy chain: argmax, nothing else


def test_the_models_recommended_settings_on_request(served: list[Served]) -> None:
    asked = _sent(served, {"messages": COLORS, "ember": {"model_defaults": True}})
    assert (asked.sampling.repeat_penalty, asked.sampling.temperature, asked.max_tokens) == (1.15, 0.7, 1024)
    flagged = _sent(served, {"messages": COLORS}, model_defaults=True)
    assert (flagged.sampling.repeat_penalty, flagged.max_tokens) == (1.15, 1024)
    assert _sent(served, {"messages": COLORS, "temperature": 0.2}, model_defaults=True).sampling.temperature == 0.2
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    assert parser.parse_args(["serve", "--model-defaults"]).model_defaults


def test_the_window_and_the_cli_keep_the_no_tools_line() -> None:
    from engine.turns.runner import TurnRunner

    backend = ScriptedBackend.from_texts("Red.")
    list(TurnRunner(backend).run(Request(messages=tuple(COLORS))))
    assert backend.requests[0].messages[0] == {"role": "system", "content": NO_TOOLS_LINE}


@pytest.mark.slow
@pytest.mark.timeout(600)  # the real model; minutes on a loaded shared machine
def test_the_built_in_model_answers_as_llama_cpp_pythons_server(served: list[Served], smollm_path: Path) -> None:
    """The interop review's example: llama-cpp-python's server read 34 prompt tokens and answered
    "1. Red\\n2. Blue\\n3. Green" greedily; Ember read 41 (the no-tools line) and, with its 1.15
    repeat penalty, answered otherwise."""
    from engine.llama.llama import LlamaBackend

    s = serve(LlamaBackend(smollm_path, n_ctx=CONTEXT), settings=RECOMMENDED)
    served.append(s)
    body = {"messages": COLORS, "max_tokens": 40, "temperature": 0}
    reply = httpx.post(f"{s.url}/chat/completions", json=body, timeout=280).json()
    assert reply["usage"]["prompt_tokens"] == 34
    assert reply["choices"][0]["message"]["content"] == "1. Red\n2. Blue\n3. Green"
