"""OpenAIBackend against a real llama-cpp-python server serving the built-in SmolLM2."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sse_stub import free_port

from engine.backends.base import Sampling, StreamInfo, make_request
from engine.backends.openai import OpenAIBackend, list_models
from engine.cancel import CancelToken
from engine.errors import BackendError
from engine.events import Piece
from models.library.default_model import DefaultModelMissing, default_model_path
from tests.llama_child import module_command

pytestmark = pytest.mark.slow

READY_TIMEOUT_S = 60.0
SERVER_DEPS = ("llama_cpp.server", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")


def _missing_server_deps() -> list[str]:
    missing: list[str] = []
    for name in SERVER_DEPS:
        try:
            found = importlib.util.find_spec(name) is not None
        except ImportError:
            found = False
        if not found:
            missing.append(name)
    return missing


def _wait_until_ready(base_url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"llama_cpp.server exited with {proc.returncode}:\n{log.read_text(errors='replace')[-2000:]}")
        try:
            if list_models(base_url, timeout=2.0):
                return
        except BackendError:
            pass  # not listening yet
        time.sleep(0.2)
    pytest.fail(f"llama_cpp.server did not answer /v1/models within {READY_TIMEOUT_S:g} s")


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    missing = _missing_server_deps()
    if missing:
        pytest.skip(f"llama-cpp-python[server] is not installed (missing: {', '.join(missing)})")
    try:
        model = default_model_path()
    except DefaultModelMissing as exc:
        pytest.skip(f"default model unavailable: {exc}")
    port = free_port()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    child = module_command(
        "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048"
    )
    with log.open("wb") as out:
        proc = subprocess.Popen(child.argv, stdout=out, stderr=subprocess.STDOUT, env=child.env, cwd=child.cwd)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        _wait_until_ready(base_url, proc, log)
        yield base_url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def test_lists_the_served_model(server_url: str) -> None:
    assert list_models(server_url)


def test_a_plain_reply_streams(server_url: str) -> None:
    backend = OpenAIBackend(server_url)
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    request = make_request(messages, sampling=Sampling.greedy(), max_tokens=16)
    info = StreamInfo()
    try:
        pieces: list[Piece] = list(backend.stream(request, CancelToken(), info))
    finally:
        backend.close()
    assert "".join(p.text for p in pieces).strip()
    assert info.finish_reason in ("stop", "length")
    assert info.retries == 0


def test_a_reply_through_ember_chat_lands_in_history(server_url: str, ember_home: Path) -> None:
    from engine.history.store import HistoryStore
    from models.library.paths import ember_paths

    env = {**os.environ, "EMBER_HOME": str(ember_home)}
    # Zero-egress mode is on for a fresh home: the user allows the server first, as the README says.
    hostport = server_url.split("//", 1)[1].split("/", 1)[0]
    subprocess.run([sys.executable, "-m", "desktop", "network", "allow", hostport], env=env, check=True, timeout=60)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "desktop",
            "chat",
            "--events",
            "--backend",
            f"openai:{server_url}",
            "--temperature",
            "0",
            "--max-tokens",
            "12",
            "What is the capital of France?",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert events[-1]["type"] == "done"
    answer = "".join(e["text"] for e in events if e["type"] == "content")
    assert answer.strip()
    store = HistoryStore(ember_paths().history_db)
    try:
        conversation = store.latest_conversation()
        assert conversation is not None
        roles = [(m.role, m.content, m.status) for m in store.path(conversation.id)]
        assert roles == [("user", "What is the capital of France?", "complete"), ("assistant", answer, "complete")]
    finally:
        store.close()
