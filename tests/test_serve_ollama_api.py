"""Ollama's API complete enough for its own examples and apps (#51 items 3, 4, 7): `curl -d` bodies,
`/api/ps`, the legacy `/api/embeddings`, `/api/pull` from the Hugging Face Hub, errors in
Ollama's shape everywhere, `/api/tags` and `/api/show` filled from the GGUF, and the embedder
listed as one (and refused for chat)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest
from fake_hub import FakeHub, sha256_of
from gguf_factory import CHATML, write_tiny_llama
from lazy_import import lazy_module
from serve_helpers import EchoBackend, Served, serve
from test_serve_embeddings import FakeEmbedder

from desktop.serve import ollama_models
from engine.backends.scripted import ScriptedBackend
from engine.hub.client import HubClient
from engine.hub.consent import allow_downloads
from models.library.paths import ember_paths

if TYPE_CHECKING:
    import ollama
    import openai
else:  # imported when a test first uses it: collection stays light (#53)
    ollama = lazy_module("ollama")
    openai = lazy_module("openai")


def _root(served: list[Served]) -> str:
    return served[-1].url.removesuffix("/v1")


def _ollama(served: list[Served]) -> ollama.Client:
    return ollama.Client(host=_root(served), timeout=30)


class FileBackend(EchoBackend):
    """The echo backend, served from a GGUF file as LlamaBackend is (`path`)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.name = path.name


# -- requests as Ollama's documentation writes them --------------------------------------------


def test_ollamas_curl_d_examples_are_read_as_json(served: list[Served]) -> None:
    """Defect 3a: `curl … -d '{…}'` sends a form Content-Type; it was a 415 in OpenAI's shape."""
    served.append(serve(ScriptedBackend.from_texts("Hi there.")))
    body = json.dumps({"model": "default", "prompt": "Hi", "stream": False})
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    response = httpx.post(f"{_root(served)}/api/generate", content=body, headers=form, timeout=30)
    assert response.status_code == 200, response.text
    assert response.json()["response"] == "Hi there."


def test_a_browser_page_still_meets_the_content_type_check(served: list[Served]) -> None:
    served.append(serve(ScriptedBackend.from_texts("never")))
    headers = {"Content-Type": "text/plain", "Origin": "http://localhost:3000"}
    response = httpx.post(f"{_root(served)}/api/generate", content=b'{"prompt": "Hi"}', headers=headers, timeout=30)
    assert response.status_code == 415
    assert isinstance(response.json()["error"], str)  # Ollama's shape


def test_every_api_error_is_in_ollamas_shape(served: list[Served]) -> None:
    """Defect 3b: the ollama client showed a Python dict as the message."""
    served.append(serve(ScriptedBackend.from_texts("never")))
    for method, path in (("GET", "/api/nothing"), ("GET", "/api/chat"), ("POST", "/api/tags")):
        response = httpx.request(method, f"{_root(served)}{path}", timeout=30)
        assert response.status_code in (404, 405) and isinstance(response.json()["error"], str), path
    with pytest.raises(ollama.ResponseError) as caught:
        _ollama(served).create(model="x", from_="default")
    assert caught.value.status_code == 404 and not caught.value.error.startswith("{")


# -- /api/ps, /api/embeddings ------------------------------------------------------------------


def test_ps_lists_the_loaded_model_with_its_size(served: list[Served], tmp_path: Path) -> None:
    model = write_tiny_llama(tmp_path / "tiny.gguf")
    served.append(serve(FileBackend(model)))
    running = _ollama(served).ps()
    [entry] = running.models
    assert entry.model == "tiny" and entry.size == model.stat().st_size
    assert entry.digest == sha256_of(model) and entry.expires_at is not None


def test_the_legacy_embeddings_endpoint(served: list[Served]) -> None:
    served.append(serve(EchoBackend(), embedder=FakeEmbedder()))
    reply = _ollama(served).embeddings(model="fake-embed", prompt="a cat")
    assert len(reply.embedding) == 4


# -- /api/tags and /api/show from the GGUF -----------------------------------------------------


def test_tags_and_show_say_what_the_gguf_says(served: list[Served], tmp_path: Path) -> None:
    """Defect 4: size 0, digest "", family/parameter size/quantisation/template blank, and
    `general.architecture` "" beside a `llama.context_length` key."""
    model = write_tiny_llama(tmp_path / "tiny.gguf", n_ctx_train=2048)
    served.append(serve(FileBackend(model)))
    client = _ollama(served)
    [entry] = client.list().models
    assert entry.size == model.stat().st_size and entry.digest == sha256_of(model)
    assert entry.details is not None
    assert (entry.details.family, entry.details.quantization_level) == ("llama", "F32")
    assert entry.details.parameter_size
    shown = client.show("tiny")
    assert shown.template == CHATML
    info = shown.modelinfo or {}
    assert info["general.architecture"] == "llama" and info["llama.context_length"] == 2048
    assert info["llama.block_count"] == 2 and info["general.name"] == "Tiny Llama (test)"


def test_the_digest_is_computed_once_per_file(
    served: list[Served], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = write_tiny_llama(tmp_path / "tiny.gguf")
    hashed: list[Path] = []
    real = ollama_models.file_sha256
    monkeypatch.setattr(ollama_models, "file_sha256", lambda p: hashed.append(p) or real(p))
    served.append(serve(FileBackend(model)))
    client = _ollama(served)
    for _ in range(3):
        client.list()
        client.show("default")
        client.ps()
    assert hashed == [model]
    model.write_bytes(model.read_bytes() + b"\0" * 64)  # a changed file is described again
    assert client.list().models[0].size == model.stat().st_size
    assert len(hashed) == 2


# -- the embedding model ------------------------------------------------------------------------


def test_the_embedder_is_listed_as_one_and_refused_for_chat(served: list[Served]) -> None:
    """Defect 7: Open WebUI offered the embedder in its chat picker, and a chat naming it was
    answered by the chat model."""
    served.append(serve(EchoBackend(), embedder=FakeEmbedder()))
    tags = httpx.get(f"{_root(served)}/api/tags", timeout=30).json()["models"]
    assert [(m["name"], m["capabilities"]) for m in tags] == [("echo", ["completion"]), ("fake-embed", ["embedding"])]
    listed = httpx.get(f"{served[-1].url}/models", timeout=30).json()["data"]
    assert [m["capabilities"] for m in listed] == [["completion"], ["embedding"]]
    assert _ollama(served).show("fake-embed").capabilities == ["embedding"]
    client = openai.OpenAI(base_url=served[-1].url, api_key="x", max_retries=0)
    with pytest.raises(openai.BadRequestError, match="embedding model"):
        client.chat.completions.create(model="fake-embed", messages=[{"role": "user", "content": "Hi"}])
    with pytest.raises(openai.BadRequestError, match="embedding model"):
        client.completions.create(model="fake-embed", prompt="Hi")
    with pytest.raises(ollama.ResponseError, match="embedding model") as caught:
        _ollama(served).chat(model="fake-embed:latest", messages=[{"role": "user", "content": "Hi"}])
    assert caught.value.status_code == 400
    assert client.chat.completions.create(model="echo", messages=[{"role": "user", "content": "Hi"}]).choices


# -- /api/pull -----------------------------------------------------------------------------------


@pytest.fixture
def hub(smollm_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with FakeHub({"ember-test/SmolLM2-GGUF": {"SmolLM2-135M-Instruct.Q4_1.gguf": smollm_path}}) as fake:
        monkeypatch.setenv("HF_ENDPOINT", fake.url)
        yield fake


def test_pull_of_an_ollama_library_name_is_a_clear_ollama_error(served: list[Served]) -> None:
    served.append(serve(EchoBackend()))
    with pytest.raises(ollama.ResponseError, match=r"hf\.co/OWNER/REPO:QUANT") as caught:
        _ollama(served).pull("llama3.2")
    assert caught.value.status_code == 400


def test_pull_before_the_consent_reaches_nothing(served: list[Served], hub: FakeHub) -> None:
    served.append(serve(EchoBackend()))
    with pytest.raises(ollama.ResponseError, match="zero-egress") as caught:
        _ollama(served).pull("hf.co/ember-test/SmolLM2-GGUF:Q4_1")
    assert caught.value.status_code == 403 and hub.requests == []


@pytest.mark.slow  # downloads a 100 MB model over loopback
def test_pull_from_the_hub_streams_ollamas_status_lines(served: list[Served], hub: FakeHub, smollm_path: Path) -> None:
    allow_downloads(ember_paths(), HubClient())
    served.append(serve(EchoBackend()))
    lines = list(_ollama(served).pull("hf.co/ember-test/SmolLM2-GGUF:Q4_1", stream=True))
    statuses = [line.status for line in lines]
    assert statuses[0] == "pulling manifest" and statuses[-3:] == [
        "verifying sha256 digest",
        "writing manifest",
        "success",
    ]
    pulling = [line for line in lines if (line.status or "").startswith("pulling ") and line.total]
    assert pulling and pulling[-1].completed == pulling[-1].total == smollm_path.stat().st_size
    assert pulling[-1].digest == f"sha256:{sha256_of(smollm_path)}"
    saved = ember_paths().models_dir / "ember-test" / "SmolLM2-GGUF" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert sha256_of(saved) == sha256_of(smollm_path)
    again = _ollama(served).pull("hf.co/ember-test/SmolLM2-GGUF:Q4_1")  # not streamed: one final line
    assert again.status == "success"
