"""Structured replies through `ember serve` (#51 items 1, 2): a reply cut by its length limit is
answered as any cut reply (200, `finish_reason: "length"`, the text so far, no retry), and
`json_object`/Ollama `format: "json"`/`json_schema` add nothing to the request's messages
unless it asks (`"ember": {"schema_instruction": true}`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from lazy_import import lazy_module
from pydantic import SecretStr
from serve_helpers import Served, serve

from engine.backends.scripted import ScriptedBackend

if TYPE_CHECKING:
    import langchain_openai
    import ollama
    import openai
else:  # imported when a test first uses it: collection stays light (#53)
    ollama = lazy_module("ollama")
    langchain_openai = lazy_module("langchain_openai")
    openai = lazy_module("openai")

ASK: Any = [{"role": "user", "content": "Give facts about Paris as JSON with keys city, country."}]
CUT = ['{"city": ', '"Paris", ', '"coun', 'try": "France"}']
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def _openai(served: list[Served], backend: ScriptedBackend) -> openai.OpenAI:
    served.append(serve(backend))
    return openai.OpenAI(base_url=served[-1].url, api_key="x", max_retries=0, timeout=30)


@pytest.mark.parametrize(
    "response_format",
    [{"type": "json_object"}, {"type": "json_schema", "json_schema": {"name": "City", "schema": SCHEMA}}],
    ids=["json_object", "json_schema"],
)
def test_a_structured_reply_cut_by_max_tokens_is_200_length_with_the_partial_json(
    served: list[Served], response_format: Any
) -> None:
    """S5-127 / defect 1: it was a 500 after three attempts."""
    backend = ScriptedBackend.from_texts(CUT, CUT, CUT)
    client = _openai(served, backend)
    reply = client.chat.completions.create(model="default", messages=ASK, response_format=response_format, max_tokens=3)
    assert reply.choices[0].finish_reason == "length"
    assert reply.choices[0].message.content == '{"city": "Paris", "coun'
    assert len(backend.requests) == 1  # no retry: the same limit would cut it again


def test_a_cut_structured_reply_streams_its_text_and_length(served: list[Served]) -> None:
    backend = ScriptedBackend.from_texts(CUT, CUT, CUT)
    client = _openai(served, backend)
    chunks = list(
        client.chat.completions.create(
            model="default", messages=ASK, response_format={"type": "json_object"}, max_tokens=3, stream=True
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == '{"city": "Paris", "coun'
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["length"]
    assert len(backend.requests) == 1


def test_a_finished_but_invalid_reply_is_still_retried(served: list[Served]) -> None:
    backend = ScriptedBackend.from_texts("not json", '{"city": "Paris"}')
    client = _openai(served, backend)
    reply = client.chat.completions.create(model="default", messages=ASK, response_format={"type": "json_object"})
    assert json.loads(reply.choices[0].message.content or "") == {"city": "Paris"}
    assert reply.choices[0].finish_reason == "stop"
    assert len(backend.requests) == 2


@pytest.mark.parametrize("stream", [False, True])
def test_ollamas_format_json_cut_by_num_predict_is_done_reason_length(served: list[Served], stream: bool) -> None:
    """S5-69: `/api/generate {"format": "json", "options": {"num_predict": 5}}` was a 500."""
    backend = ScriptedBackend.from_texts(CUT, CUT, CUT)
    served.append(serve(backend))
    client = ollama.Client(host=served[-1].url.removesuffix("/v1"))
    if stream:
        parts = list(
            client.generate(model="default", prompt="Paris?", format="json", options={"num_predict": 3}, stream=True)
        )
        text, last = "".join(p.response or "" for p in parts), parts[-1]
    else:
        last = client.generate(model="default", prompt="Paris?", format="json", options={"num_predict": 3})
        text = last.response
    assert text == '{"city": "Paris", "coun' and last.done_reason == "length"
    assert len(backend.requests) == 1


@pytest.mark.parametrize(
    "response_format",
    [{"type": "json_object"}, {"type": "json_schema", "json_schema": {"name": "City", "schema": SCHEMA}}],
    ids=["json_object", "json_schema"],
)
def test_structured_requests_add_nothing_to_the_messages(served: list[Served], response_format: Any) -> None:
    """Defect 2: the schema (`{"type": "object"}` for json_object) was folded into a system message,
    and the built-in model answered with it."""
    backend = ScriptedBackend.from_texts('{"city": "Paris"}')
    client = _openai(served, backend)
    client.chat.completions.create(model="default", messages=ASK, response_format=response_format)
    assert [dict(m) for m in backend.requests[0].messages] == ASK


def test_ollamas_format_json_adds_nothing_either(served: list[Served]) -> None:
    backend = ScriptedBackend.from_texts('{"city": "Paris"}')
    served.append(serve(backend))
    reply = ollama.Client(host=served[-1].url.removesuffix("/v1")).chat(model="default", messages=ASK, format="json")
    assert json.loads(reply.message.content or "") == {"city": "Paris"}
    assert [dict(m) for m in backend.requests[0].messages] == ASK


def test_the_schema_instruction_is_one_field_away(served: list[Served]) -> None:
    backend = ScriptedBackend.from_texts('{"city": "Paris"}')
    served.append(serve(backend))
    body = {
        "model": "default",
        "messages": ASK,
        "response_format": {"type": "json_schema", "json_schema": {"name": "City", "schema": SCHEMA}},
        "ember": {"schema_instruction": True},
    }
    assert httpx.post(f"{served[-1].url}/chat/completions", json=body, timeout=30).status_code == 200
    system = backend.requests[0].messages[0]
    assert system["role"] == "system" and json.dumps(SCHEMA) in str(system["content"])


def test_langchains_json_mode_parses(served: list[Served]) -> None:
    """LangChain's `with_structured_output(method="json_mode")` got `{"type": "object"}` back from the
    built-in model; here the request it sends must reach the model as it is, and the reply parse."""
    backend = ScriptedBackend.from_texts('{"city": "Paris", "country": "France"}')
    served.append(serve(backend))
    llm = langchain_openai.ChatOpenAI(base_url=served[-1].url, api_key=SecretStr("x"), model="default", max_retries=0)
    chain = llm.with_structured_output(None, method="json_mode")  # pyright: ignore[reportArgumentType]
    assert chain.invoke("Facts about Paris as JSON with keys city and country.") == {
        "city": "Paris",
        "country": "France",
    }
    assert [m["role"] for m in backend.requests[0].messages] == ["user"]


@pytest.mark.slow
@pytest.mark.timeout(600)  # a real model under a grammar; minutes on a loaded shared machine
def test_the_built_in_model_answers_json_object_from_the_prompt_and_a_cut_is_length(
    served: list[Served], smollm_path: Path
) -> None:
    """The review's reproductions on the real SmolLM2, greedy: json_object answered `{"type": "object"}`
    (the schema it was shown), and a cut was a 500 after three attempts. LangChain's json_mode parses."""
    from engine.llama.llama import LlamaBackend

    served.append(serve(LlamaBackend(smollm_path, n_ctx=2048), context_size=2048))
    client = openai.OpenAI(base_url=served[-1].url, api_key="x", max_retries=0, timeout=300)
    ask = "Give facts about Paris as JSON with keys city, country, population_millions."
    paris: Any = [{"role": "user", "content": ask}]
    reply = client.chat.completions.create(
        model="default", messages=paris, response_format={"type": "json_object"}, max_tokens=60, temperature=0
    )
    content = reply.choices[0].message.content or ""
    assert '"type"' not in content and '"city"' in content
    cut = client.chat.completions.create(
        model="default", messages=paris, response_format={"type": "json_object"}, max_tokens=5, temperature=0
    )
    assert cut.choices[0].finish_reason == "length" and (cut.choices[0].message.content or "").startswith("{")
    assert cut.usage is not None and cut.usage.completion_tokens == 5  # one attempt
    settings: Any = {"temperature": 0, "max_tokens": 120}
    llm = langchain_openai.ChatOpenAI(base_url=served[-1].url, api_key=SecretStr("x"), model="default", **settings)
    parsed = llm.with_structured_output(None, method="json_mode").invoke(  # pyright: ignore[reportArgumentType]
        "Return a JSON object with keys city and country for Paris."
    )
    assert isinstance(parsed, dict) and parsed.get("city") == "Paris"
