"""`"ember": {"collection": NAME}` on `/v1/chat/completions`: answers from a collection carry their sources
(and each paragraph's) in the choice's `ember` object, through OpenAI's own client (issue #50)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletion
from serve_helpers import Served, last_user_text, serve

from engine.backends.base import Capabilities, PlainBackend, Request, StreamInfo
from engine.cancel import CancelToken
from engine.docs.index import DocIndex, default_path
from engine.docs.indexer import index_collection
from engine.events import Piece
from tests.projector_fixture import png

QUESTION: Any = [{"role": "user", "content": "How do I make the daemon reload its quokka table?"}]
PICTURE = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(png(4, 4)).decode()}}
ANSWER = (
    "Send the daemon SIGHUP and it reloads the quokka table without a restart.\n\n"
    "Bananas ripen faster beside apples on the kitchen counter."
)


OFF_TOPIC = "Bananas ripen faster beside apples on the kitchen counter, and pears do too."


class Answering(PlainBackend):
    """Answers `answer` (no `[n]`, like the built-in model) in pieces; records each request."""

    capabilities = Capabilities(device="Scripted")

    def __init__(self, answer: str = ANSWER) -> None:
        self.name = "answering"
        self.answer = answer
        self.requests: list[Request] = []

    def stream(self, request: Request, cancel: CancelToken, info: StreamInfo) -> Iterator[Piece]:
        self.requests.append(request)
        for i, word in enumerate(self.answer.split(" ")):
            yield Piece(word if i == 0 else " " + word)
        info.finish_reason = "stop"

    def close(self) -> None:
        pass


@pytest.fixture
def collection(tmp_path: Path) -> str:
    """A collection 'Frob' (keyword search only: no embedder) of two short files."""
    folder = tmp_path / "frob"
    folder.mkdir()
    (folder / "signals.md").write_text(
        "# Signals\n\nSending SIGHUP makes the frob daemon reload the quokka table without a restart.\n"
    )
    (folder / "config.md").write_text("# Settings\n\nThe frob daemon reads /etc/frob.conf when it starts.\n")
    with DocIndex.open(default_path()) as index:
        coll = index.create_collection("Frob")
        index.add_roots(coll, [folder])
        index_collection(index, coll)
    return "Frob"


def _client(served: list[Served], answer: str = ANSWER) -> tuple[openai.OpenAI, Answering]:
    backend = Answering(answer)
    served.append(serve(backend, context_size=4096))
    return openai.OpenAI(base_url=served[-1].url, api_key="x", max_retries=0, timeout=30), backend


def _signals(ember: dict[str, Any]) -> int:
    return next(s["n"] for s in ember["sources"] if Path(s["path"]).name == "signals.md")


def test_an_answer_from_a_collection_carries_its_sources_and_each_paragraphs(
    served: list[Served], collection: str
) -> None:
    client, backend = _client(served)
    asked = {"ember": {"collection": collection}}
    reply = client.chat.completions.create(model="m", messages=QUESTION, extra_body=asked)
    sent = last_user_text(backend.requests[0].messages)
    assert "SIGHUP" in sent and "[1]" in sent  # the passages went into the question, numbered
    choice = reply.choices[0]
    assert choice.message.content == ANSWER
    ember = (choice.model_extra or {})["ember"]
    assert ember["sources"] and all({"n", "path", "start", "end", "text"} <= set(s) for s in ember["sources"])
    first, second = ember["paragraphs"]
    assert ANSWER[first["start"] : first["end"]].startswith("Send the daemon SIGHUP")
    assert first["sources"] == [_signals(ember)] and first["cited"] is False
    assert second["sources"] == []  # bananas: no passage supports it
    assert ember["answer_from"] == {"basis": "paragraphs", "sources": [_signals(ember)]}


def test_an_answer_no_passage_supports_still_says_what_the_model_was_given(
    served: list[Served], collection: str
) -> None:
    """Off-topic: no paragraph is supported, so `answer_from` names every passage given, as given (#50)."""
    client, _ = _client(served, OFF_TOPIC)
    for stream in (False, True):
        chunks = client.chat.completions.create(
            model="m", messages=QUESTION, stream=stream, extra_body={"ember": {"collection": collection}}
        )
        choices = [chunks.choices[0]] if isinstance(chunks, ChatCompletion) else [c.choices[0] for c in chunks]
        ember = next(c.model_extra["ember"] for c in choices if c.model_extra and "ember" in c.model_extra)
        assert [p["sources"] for p in ember["paragraphs"]] == [[]]
        assert ember["answer_from"] == {"basis": "given", "sources": [s["n"] for s in ember["sources"]]}
        assert ember["answer_from"]["sources"]  # never nothing while passages were given


def test_streamed_the_sources_come_with_the_finish_chunk(served: list[Served], collection: str) -> None:
    client, _ = _client(served)
    chunks = list(
        client.chat.completions.create(
            model="m", messages=QUESTION, stream=True, extra_body={"ember": {"collection": collection}}
        )
    )
    carrying = [c for c in chunks if c.choices and "ember" in (c.choices[0].model_extra or {})]
    assert len(carrying) == 1 and carrying[0].choices[0].finish_reason == "stop"
    ember = (carrying[0].choices[0].model_extra or {})["ember"]
    assert ember["paragraphs"][0]["sources"] == [_signals(ember)]
    assert ember["answer_from"]["basis"] == "paragraphs"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == ANSWER


def test_a_request_naming_no_collection_gets_no_ember_field(served: list[Served], collection: str) -> None:
    client, backend = _client(served)
    reply = client.chat.completions.create(model="m", messages=QUESTION)
    assert "ember" not in (reply.choices[0].model_extra or {})
    assert last_user_text(backend.requests[0].messages) == QUESTION[0]["content"]


def test_an_unknown_collection_is_a_404_naming_it_before_the_model_runs(served: list[Served], collection: str) -> None:
    client, backend = _client(served)
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="m", messages=QUESTION, extra_body={"ember": {"collection": "Tax"}})
    assert "no collection named 'Tax'" in str(info.value)
    assert backend.requests == []


@pytest.mark.parametrize(("value", "words"), [("", "is empty"), (3, "must be a string")])
def test_a_bad_collection_field_is_a_400_naming_it(served: list[Served], value: object, words: str) -> None:
    client, _ = _client(served)
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="m", messages=QUESTION, extra_body={"ember": {"collection": value}})
    assert words in str(info.value) and "ember.collection" in str(info.value)


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello"}],
        [{"role": "user", "content": [{"type": "text", "text": "what is it?"}, PICTURE]}],
    ],
)
def test_the_passages_need_a_users_question_in_text_last(served: list[Served], messages: Any) -> None:
    client, backend = _client(served)
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="m", messages=messages, extra_body={"ember": {"collection": "Frob"}})
    assert "the last message to be the user's question" in str(info.value)
    assert backend.requests == []
