"""The one session (engine/session): what every front end's turn is, tested directly with fakes.

The request that is fitted is the request that is sent (system prompt, the tools'
descriptions, replayed calls and results, the new message); a message that cannot be sent
is refused before anything is stored; the answer and its tool calls are stored together.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from engine.backends.scripted import ScriptedBackend
from engine.errors import ConfigError
from engine.events import ToolCall, TurnDone
from engine.history.store import HistoryStore
from engine.runtime import Engine
from engine.session.reply_format import ReplyFormat
from engine.session.session import Ask, ChatSession, Turn
from engine.session.settings import ConversationSettings, resolve
from engine.session.turn_documents import TurnDocuments
from engine.tools.permissions import Decision
from engine.tools.registry import Tool, ToolSet, object_schema
from engine.turns.context_policy import ContextPolicy, MessageTooLongError
from models.library.settings import ModelSettings


def hermes(name: str, **arguments: Any) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def echo_tools(description: str = "Repeat the text back, word for word, to check a tool works.") -> ToolSet:
    def run(arguments: Mapping[str, Any]) -> str:
        return f"echo: {arguments.get('text', '')}"

    schema = object_schema({"text": {"type": "string", "description": "what to say back"}}, ["text"])
    return ToolSet([Tool("echo", description, schema, run)])


def approve(_call: ToolCall) -> Decision:
    return Decision.APPROVE


@pytest.fixture
def session(tmp_path: Path) -> Any:
    chat = ChatSession(HistoryStore(tmp_path / "history.db"))
    yield chat
    chat.close()


def one_turn(
    session: ChatSession, backend: ScriptedBackend, text: str, tools: ToolSet | None = None, settings: Any = None
) -> tuple[Any, list[Any]]:
    plan = session.prepare(Ask.send(text), settings or resolve(), tools=tools).fit(backend)
    turn = session.begin(plan, model="m", approver=approve)
    return plan, list(turn.run(backend))


def test_with_tools_the_counted_prompt_is_the_sent_prompt_replayed_calls_included(session: ChatSession) -> None:
    backend = ScriptedBackend.from_texts(hermes("echo", text="hi"), "It said hi.", "Second answer.")
    backend.n_ctx = 4096
    tools = echo_tools()
    _, events = one_turn(session, backend, "Use the echo tool on hi.", tools)
    assert isinstance(events[-1], TurnDone)
    plan, events = one_turn(session, backend, "And again?", tools)
    assert isinstance(events[-1], TurnDone)
    sent = backend.requests[-1]
    # The earlier call and its result were replayed before their answer, and the tools were offered.
    roles = [m["role"] for m in sent.messages]
    assert roles[:4] == ["user", "assistant", "tool", "assistant"] and roles[-1] == "user"
    assert sent.tools == tuple(tools.specs())
    # What was measured before anything was stored is exactly what the model was sent.
    assert plan.fitted is not None and plan.fitted.measured
    assert backend.count_prompt_tokens(sent.messages, sent.tools) == plan.fitted.prompt_tokens
    assert sent.messages == plan.request.messages


def test_the_tools_descriptions_count_against_the_context(session: ChatSession) -> None:
    backend = ScriptedBackend.from_texts("unused")
    backend.n_ctx = 200  # the message fits alone, but not with the tools' descriptions
    text = "Please tell me what the time is and compute twelve times thirty four with the calculator."
    plain = session.prepare(Ask.send(text), resolve()).fit(backend)
    plain.release()
    assert plain.fitted is not None and plain.fitted.prompt_tokens < 60
    with pytest.raises(MessageTooLongError, match="tools' descriptions"):
        session.prepare(Ask.send(text), resolve(), tools=echo_tools("Say it back. " * 20)).fit(backend)
    assert session.store.conversations() == [] and backend.requests == []  # refused: nothing stored, nothing sent


def test_a_refused_message_stores_nothing_and_frees_the_conversation(session: ChatSession) -> None:
    backend = ScriptedBackend.from_texts("First.", "Next.")
    backend.n_ctx = 200
    one_turn(session, backend, "hello")
    conversation = session.conversation_id
    plan = session.prepare(Ask.send("word " * 400), resolve())
    with pytest.raises(MessageTooLongError):
        plan.fit(backend)
    plan.release()
    assert conversation is not None
    assert [m.content for m in session.path()] == ["hello", "First."]
    _, events = one_turn(session, backend, "still here?")  # the lock was given back
    assert isinstance(events[-1], TurnDone)


def test_a_template_that_fails_refuses_the_message_before_it_is_stored(session: ChatSession) -> None:
    class BrokenTemplate(ScriptedBackend):
        def count_prompt_tokens(self, messages: Any, tools: Any = None) -> int:
            raise ConfigError("the chat template failed: boom")

    backend = BrokenTemplate.from_texts("never")
    backend.n_ctx = 512
    plan = session.prepare(Ask.send("hello"), resolve())
    with pytest.raises(ConfigError, match="boom"):
        plan.fit(backend)
    plan.release()
    assert session.store.conversations() == []


def test_the_answer_and_its_tool_calls_are_stored_together_and_always_allow_is_kept(session: ChatSession) -> None:
    backend = ScriptedBackend.from_texts(hermes("echo", text="hi"), "It said hi.")
    plan = session.prepare(Ask.send("echo hi"), resolve(), tools=echo_tools())
    turn = session.begin(plan, model="m", approver=lambda _c: Decision.ALWAYS)
    assert isinstance(list(turn.run(backend))[-1], TurnDone)
    answer = session.path()[-1]
    assert answer.content == "It said hi." and answer.status == "complete"
    assert answer.stats["tools"] == [
        {
            "id": "call_1",
            "name": "echo",
            "arguments": {"text": "hi"},
            "at": 0,
            "approval": "approved_always",
            "result": "echo: hi",
            "error": False,
        }
    ]
    assert session.settings.tools_always == ("echo",)


def test_the_system_prompt_comes_from_the_conversation_else_the_model(session: ChatSession) -> None:
    backend = ScriptedBackend.from_texts("One.", "Two.")
    settings = resolve(ModelSettings(system_prompt="Model's prompt."))
    one_turn(session, backend, "hi", settings=settings)
    assert backend.requests[0].messages[0]["content"].startswith("Model's prompt.")
    session.state.update_settings(system="Conversation's prompt.")
    one_turn(session, backend, "again", settings=settings)
    assert backend.requests[1].messages[0]["content"].startswith("Conversation's prompt.")


def test_regenerate_and_edit_run_through_the_same_check(session: ChatSession) -> None:
    backend = ScriptedBackend.from_texts("A1.", "A1 again.", "A1 edited.")
    one_turn(session, backend, "Q1")
    question, answer = session.path()
    turn = session.begin(session.prepare(Ask.regenerate(answer.id), resolve()).fit(backend), model="m")
    list(turn.run(backend))
    assert [m.content for m in session.path()] == ["Q1", "A1 again."]
    assert backend.requests[1].messages[-1] == {"role": "user", "content": "Q1"}
    turn = session.begin(session.prepare(Ask.edit(question.id, "Q1, better"), resolve()).fit(backend), model="m")
    list(turn.run(backend))
    assert [m.content for m in session.path()] == ["Q1, better", "A1 edited."]


def test_conversation_settings_are_typed_tolerant_and_keep_what_they_do_not_know() -> None:
    stored = {
        "system": "Be brief.",
        "context_policy": "rolling",
        "reply_format": {"kind": "json"},
        "tools_enabled": True,
        "tools_folders": ["/tmp"],
        "tools_always": ["calculator", 3],
        "tools_mcp": "not a list",
        "from_a_newer_ember": {"x": 1},
    }
    settings = ConversationSettings.from_stored(stored)
    assert settings.system == "Be brief." and settings.context_policy is ContextPolicy.ROLLING
    assert settings.reply_format == ReplyFormat("json") and settings.tools_enabled
    assert settings.tools_folders == ("/tmp",) and settings.tools_always == ("calculator", "3")
    assert settings.tools_mcp == ()
    again = settings.to_stored()
    assert again["from_a_newer_ember"] == {"x": 1} and again["context_policy"] == "rolling"
    assert ConversationSettings.from_stored({"context_policy": 7, "tools_enabled": "yes"}) == ConversationSettings()


def test_an_unsaved_session_runs_the_same_turn_and_leaves_nothing_behind() -> None:
    session = ChatSession.unsaved()
    folder = session.store.db_path.parent
    backend = ScriptedBackend.from_texts("Hi.")
    _, events = one_turn(session, backend, "hello")
    assert isinstance(events[-1], TurnDone) and not session.saved
    assert [m.content for m in session.path()] == ["hello", "Hi."]
    session.close()
    assert not folder.exists()


@pytest.mark.slow
def test_a_real_tool_turn_is_fitted_to_what_is_sent_and_rendered_once(smollm_path: Path, tmp_path: Path) -> None:
    from engine.llama.llama import LlamaBackend

    backend = LlamaBackend(smollm_path, n_ctx=2048, n_threads=1)
    session = ChatSession(HistoryStore(tmp_path / "h.db"))
    try:
        tools = echo_tools()
        plan = session.prepare(
            Ask.send("Say hello in three words."), resolve(ModelSettings(max_tokens=8)), tools=tools
        ).fit(backend)
        renders = backend.renders
        turn = session.begin(plan, model="smollm")
        events = list(turn.run(backend))
        done = events[-1]
        assert isinstance(done, TurnDone) and done.stats.attempts == 1
        assert plan.fitted is not None
        assert done.stats.prompt_tokens == plan.fitted.prompt_tokens  # counted = sent, tools included
        assert backend.renders == renders  # the stream reused the fit's rendering: one render per turn
    finally:
        session.close()
        backend.close()


def test_settings_change_at_once_and_are_written_on_the_history_thread(session: ChatSession) -> None:
    backend = ScriptedBackend.from_texts("a", "b")
    one_turn(session, backend, "first")
    first = session.conversation_id
    session.new()
    one_turn(session, backend, "second")
    second = session.conversation_id
    assert first is not None and second is not None
    session.offload()
    writers: list[str] = []
    store_update = session.store.update_conversation

    def noted(*args: Any, **kwargs: Any) -> None:
        writers.append(threading.current_thread().name)
        store_update(*args, **kwargs)

    session.store.update_conversation = noted  # type: ignore[method-assign]

    async def main() -> None:
        write = session.state.update_settings_soon(context_policy=ContextPolicy.ROLLING)
        assert write is not None
        assert session.settings.context_policy is ContextPolicy.ROLLING  # at once, before any write
        await session.io(lambda: session.open(first))  # another conversation opens meanwhile
        await write

    asyncio.run(main())
    assert writers and all(name.startswith("ember-history") for name in writers)
    stored = {
        cid: ConversationSettings.from_stored(session.store.conversation(cid).settings).context_policy
        for cid in (first, second)
    }
    assert stored == {first: None, second: ContextPolicy.ROLLING}  # the one open when it was asked
    session.new()
    assert session.state.update_settings_soon(context_policy=ContextPolicy.STOP) is None  # fresh: kept until stored
    assert session.settings.context_policy is ContextPolicy.STOP


@pytest.mark.slow  # starts a process
def test_a_scratch_folder_left_by_a_killed_process_is_swept_by_the_next_unsaved_session(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from engine.session import scratch

    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    left = tmp_path / f"{scratch.PREFIX}{dead.stdout.strip()}-abc"  # its process has ended: no close ran
    left.mkdir()
    (left / "history.db").write_bytes(b"a conversation with history off")
    mine = tmp_path / f"{scratch.PREFIX}{os.getpid()}-def"  # a live process's (this one): kept
    mine.mkdir()
    other = tmp_path / f"{scratch.PREFIX}notapid"  # not a name the sweep made: left alone
    other.mkdir()
    if os.name != "posix":
        assert scratch.sweep(tmp_path) == 0
        return
    assert scratch.sweep(tmp_path) == 1
    assert not left.exists() and mine.exists() and other.exists()


def test_both_faces_of_a_turn_take_the_same_options_and_give_the_same_turn(tmp_path: Path) -> None:
    """`open_turn`/`run` (`ember chat`) and `open_turn_async`/`run_async` (the window) are one path: the
    same parameters (the async face took no opened documents, the sync one no opener), and the same
    request, options, events and stored rows for the same ask."""
    sync_face, async_face = (
        inspect.signature(f).parameters for f in (ChatSession.open_turn, ChatSession.open_turn_async)
    )
    assert list(sync_face.values())[2:] == list(async_face.values())[2:]  # all but self and backend/engine
    note = tmp_path / "note.md"
    note.write_text("# Oven\n\nBake the loaf at 220 degrees for thirty minutes.\n")
    options: dict[str, Any] = {"tools": echo_tools(), "policy": ContextPolicy.ROLLING, "model": "m"}
    options |= {"approver": approve, "max_tool_rounds": 2, "ask_again": True}

    def seen(chat: ChatSession, turn: Turn, events: list[Any]) -> tuple[Any, ...]:
        assert turn.tools is not None
        rows = [(m.role, m.content, m.status) for m in chat.path()]
        return turn.request, turn.policy, turn.tools.max_rounds, [type(e).__name__ for e in events], rows

    async def one(face: str, opener: bool, docs: TurnDocuments) -> tuple[Any, ...]:
        backend = ScriptedBackend([[hermes("echo", text="hi")], ["Thirty minutes [1]."]], n_ctx=4096)
        chat, engine = ChatSession(HistoryStore(tmp_path / f"{face}{opener}.db")), Engine(backend)

        async def opened() -> TurnDocuments:
            return docs

        given = opened if opener else docs
        try:
            if face == "sync":
                turn = chat.open_turn(backend, Ask.send("How long?"), resolve(), documents=given, **options)
                return seen(chat, turn, list(turn.run(backend)))
            turn = await chat.open_turn_async(engine, Ask.send("How long?"), resolve(), documents=given, **options)
            return seen(chat, turn, [e async for e in turn.run_async(engine)])
        finally:
            chat.close()
            await engine.aclose()

    results = []
    for face, opener in itertools.product(("sync", "async"), (False, True)):
        docs = TurnDocuments.open([note], None)
        try:
            results.append(asyncio.run(one(face, opener, docs)))
        finally:
            docs.close()
    request, _, rounds, events, rows = results[0]
    assert rounds == 2 and events[0] == "Sources" and "Bake the loaf" in str(request.messages[-1]["content"])
    assert [r[0] for r in rows] == ["user", "assistant"] and "ToolResult" in events
    assert all(r == results[0] for r in results[1:])
