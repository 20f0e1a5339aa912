"""LangChain's own OpenAI clients (`langchain-openai`) against `ember serve`, end to end (issue #40):
`ChatOpenAI` invoke and stream, `bind_tools` with a call coming back, `with_structured_output(...,
method="function_calling")` complete and cut by `max_tokens=48` (a partial reply with
`finish_reason: "length"`, never a 500), and `OpenAIEmbeddings` on /v1/embeddings.

Offline: LangSmith tracing is off, and nothing here counts tokens with tiktoken (which would
download its file); `check_embedding_ctx_length=False` is what the README tells users."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.tools import tool
from lazy_import import lazy_module
from pydantic import BaseModel, Field, SecretStr
from serve_helpers import Served, serve
from test_serve_embeddings import FakeEmbedder, vector

from engine.backends.base import Backend
from engine.backends.scripted import ScriptedBackend

if TYPE_CHECKING:
    import langchain_openai
else:  # imported when a test first uses it: collection stays light (#53)
    langchain_openai = lazy_module("langchain_openai")

CALL = (
    '<tool_call>\n{"name": "City", "arguments": {"city": "Paris", "country": "France", "population_millions": 2.1}}'
    "\n</tool_call>"
)
# The same call one character a piece (the scripted backend's token): 48 pieces end inside the arguments,
# and a partial call's arguments are the text written so far.
CUT_ARGUMENTS = CALL[:48].split('"arguments": ')[1]
WEATHER = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
LOOPBACK = ("127.0.0.1", "::1", "localhost", b"127.0.0.1", b"localhost", None)


class City(BaseModel):
    """Facts about a city."""

    city: str = Field(description="city name")
    country: str
    population_millions: float


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}"


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No LangSmith tracing, whatever the developer's shell says, and any connection beyond loopback
    (tiktoken's download, LangSmith) fails the test instead of leaving the machine."""
    connect, resolve = socket.socket.connect, socket.getaddrinfo

    def loopback_only(sock: socket.socket, address: Any) -> None:
        host = address[0] if isinstance(address, tuple) else ""
        if sock.family in (socket.AF_INET, socket.AF_INET6) and host not in LOOPBACK:
            raise AssertionError(f"a LangChain test tried to reach {address!r}")
        connect(sock, address)

    def resolve_loopback(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in LOOPBACK:
            raise AssertionError(f"a LangChain test tried to look up {host!r}")
        return resolve(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", loopback_only)
    monkeypatch.setattr(socket, "getaddrinfo", resolve_loopback)
    for name in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGCHAIN_TRACING"):
        monkeypatch.setenv(name, "false")
    for name in (
        "LANGSMITH_API_KEY",
        "LANGCHAIN_API_KEY",
        "LANGSMITH_ENDPOINT",
        "LANGCHAIN_ENDPOINT",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "OPENAI_ORG_ID",
    ):
        monkeypatch.delenv(name, raising=False)


def _started(served: list[Served], backend: Backend, **kwargs: Any) -> Served:
    s = serve(backend, **kwargs)
    served.append(s)
    return s


def _chat(s: Served, **kwargs: Any) -> langchain_openai.ChatOpenAI:
    return langchain_openai.ChatOpenAI(
        base_url=s.url, api_key=SecretStr("unused"), model="default", max_retries=0, timeout=60, **kwargs
    )


def test_invoke_answers_the_scripted_reply_with_its_usage(served: list[Served]) -> None:
    backend = ScriptedBackend.from_texts(["Paris", " is", " the", " capital."])
    reply = _chat(_started(served, backend), temperature=0).invoke("What is the capital of France?")
    assert reply.content == "Paris is the capital."
    assert reply.response_metadata["finish_reason"] == "stop"
    assert reply.usage_metadata is not None and reply.usage_metadata["output_tokens"] == 4
    [request] = backend.requests
    assert request.messages == ({"role": "user", "content": "What is the capital of France?"},)  # nothing added


def test_stream_arrives_in_pieces_and_ends_with_stop(served: list[Served]) -> None:
    backend = ScriptedBackend.from_texts(["One", ",", " two", ",", " three."])
    chunks = list(_chat(_started(served, backend)).stream("Count to three."))
    texts = [c.content for c in chunks if c.content]
    assert "".join(str(t) for t in texts) == "One, two, three." and len(texts) >= 3
    merged = _merged(iter(chunks))
    assert merged.response_metadata["finish_reason"] == "stop"


def _merged(chunks: Iterator[Any]) -> AIMessageChunk:
    """A stream's chunks added up, as LangChain does to rebuild the whole message."""
    total = next(chunks)
    for chunk in chunks:
        total = total + chunk
    assert isinstance(total, AIMessageChunk)
    return total


def test_bind_tools_gets_the_call_back_as_a_tool_call(served: list[Served]) -> None:
    backend = ScriptedBackend.from_texts(WEATHER)
    reply = _chat(_started(served, backend)).bind_tools([get_weather]).invoke("Weather in Oslo?")
    assert isinstance(reply, AIMessage)
    assert [(c["name"], c["args"]) for c in reply.tool_calls] == [("get_weather", {"city": "Oslo"})]
    assert reply.response_metadata["finish_reason"] == "tool_calls"
    assert [t.get("function", {}).get("name") for t in backend.requests[0].tools or []] == ["get_weather"]


def test_bind_tools_streamed_gets_the_call_back_too(served: list[Served]) -> None:
    backend = ScriptedBackend.from_texts(WEATHER)
    chunks = _chat(_started(served, backend)).bind_tools([get_weather]).stream("Weather in Oslo?")
    merged = _merged(iter(chunks))
    assert [(c["name"], c["args"]) for c in merged.tool_calls] == [("get_weather", {"city": "Oslo"})]


def test_structured_output_by_function_calling_parses_a_complete_call(served: list[Served]) -> None:
    backend = ScriptedBackend.from_texts(CALL)
    structured = _chat(_started(served, backend), max_tokens=48).with_structured_output(
        City, method="function_calling", include_raw=True
    )
    out: Any = structured.invoke("Give facts about Paris.")
    assert out["parsed"] == City(city="Paris", country="France", population_millions=2.1)
    assert out["raw"].response_metadata["finish_reason"] == "tool_calls"
    assert len(backend.requests) == 1  # the whole call is one scripted piece: well under 48


def test_structured_output_cut_by_max_tokens_48_is_a_partial_reply_with_length(served: list[Served]) -> None:
    backend = ScriptedBackend.from_texts(list(CALL), "never asked")
    structured = _chat(_started(served, backend), max_tokens=48).with_structured_output(
        City, method="function_calling", include_raw=True
    )
    out: Any = structured.invoke("Give facts about Paris.")
    raw = out["raw"]
    assert raw.response_metadata["finish_reason"] == "length"
    assert out["parsed"] is None  # a partial call is no City, and LangChain says so rather than raising
    [partial] = raw.invalid_tool_calls  # the arguments so far, as OpenAI returns them
    assert (partial["name"], partial["args"]) == ("City", CUT_ARGUMENTS) and CUT_ARGUMENTS == '{"city'
    assert raw.usage_metadata["output_tokens"] == 48
    assert len(backend.requests) == 1  # no retry spent on a length cut
    [request] = backend.requests
    assert request.max_tokens == 48


@pytest.mark.slow
@pytest.mark.timeout(600)  # a real model under a grammar; minutes on a loaded shared machine
def test_structured_output_on_the_built_in_model_at_max_tokens_48(served: list[Served], smollm_path: Path) -> None:
    """The real SmolLM2, greedy: a City whose call is longer than 48 tokens is cut, and LangChain gets
    the partial reply with `finish_reason: "length"` from one attempt."""
    from engine.llama.llama import LlamaBackend

    s = _started(served, LlamaBackend(smollm_path, n_ctx=2048), context_size=2048)
    structured = _chat(s, max_tokens=48, temperature=0).with_structured_output(
        City, method="function_calling", include_raw=True
    )
    out: Any = structured.invoke(
        "Give facts about Paris, France, including its population in millions. Spell out the city's full official name."
    )
    raw = out["raw"]
    if raw.response_metadata["finish_reason"] != "length":  # greedy wrote a call under 48 tokens
        pytest.fail(f"expected a cut at 48 tokens, got {raw.response_metadata} {raw.tool_calls}")
    assert raw.usage_metadata["output_tokens"] == 48  # one attempt: no retry spent
    assert [c["name"] for c in raw.invalid_tool_calls + raw.tool_calls] == ["City"]


def test_openai_embeddings_embed_documents_and_query_offline(served: list[Served]) -> None:
    embedder = FakeEmbedder()
    s = _started(served, ScriptedBackend.from_texts(), embedder=embedder)
    embeddings = langchain_openai.OpenAIEmbeddings(
        base_url=s.url,
        api_key=SecretStr("unused"),
        model="default",
        check_embedding_ctx_length=False,
        max_retries=0,
    )
    texts = ["birds sing", "fish swim", "cats sleep"]
    got = embeddings.embed_documents(texts)
    assert len(got) == 3
    for text, v in zip(texts, got, strict=True):
        assert v == pytest.approx(vector(text), abs=1e-6)
    assert embeddings.embed_query("birds sing") == pytest.approx(vector("birds sing"), abs=1e-6)
    assert [t for batch in embedder.batches for t in batch] == [*texts, "birds sing"]
