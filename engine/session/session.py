"""One conversation, one turn: the Qt-free session every front end runs its turns through.

The window (desktop/core/controller.py), `ember chat` and `ember serve` do the same, in the same
order (docs/DESIGN.md, "Data flow"):

    plan = session.prepare(Ask.send(text), settings, tools=toolset)  # reads the branch once, under its lock
    plan = plan.fit(backend, documents)   # the request actually sent, fitted: a refusal stores nothing
    turn = session.begin(plan, model=name)                            # the question is stored
    for event in turn.run(backend, cancel): show(event)               # recorded as it streams

`open_turn` (on the caller's thread) and `open_turn_async` (on an event loop: store work through
`io`, on the history thread once `offload()` gave the session one; the fit on the engine's
counting thread) are those steps, one path with the same options; `run` and `run_async` are the
turn's two faces. An API request is the prompt: `open_request_async` plans it with
`Plan.of_request` (sent as it is, never cut) and, with `--record`, `begin_request` stores its past
as a new conversation. The open conversation's settings and documents are its `ConversationState`.
A session without history (`unsaved()`) keeps its conversations in a scratch database removed on
close, so there is one code path either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Coroutine, Generator, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from itertools import chain
from pathlib import Path
from typing import Any, Literal, TypedDict, TypeVar, Unpack

from engine.backends.base import Backend, Message, Request, Schema, make_request
from engine.backends.image_input import ImageData, refuse_unseen
from engine.cancel import CancelToken
from engine.docs.attribution import AnswerSources
from engine.docs.embed import reply_streaming
from engine.errors import ConfigError, ContextOverflowError
from engine.events import Event, Sources, ToolEvent
from engine.history.conversation_lock import ConversationBusy, ConversationLock
from engine.history.images import StoredImages, read_images
from engine.history.recorder import TurnRecorder
from engine.history.store import HistoryStore
from engine.history.types import HistoryError, StoredMessage
from engine.runtime import Engine
from engine.session.conversation_state import ConversationState
from engine.session.history_thread import HistoryThread
from engine.session.messages import branch_messages
from engine.session.scratch import make_scratch
from engine.session.settings import ConversationSettings, TurnSettings
from engine.session.turn_documents import TurnDocuments
from engine.tools.permissions import Approver, ToolPermissions, ToolUse, deny_all
from engine.tools.registry import ToolSet
from engine.turns.context_policy import ContextFullError, ContextPolicy, Fit, unmeasured
from engine.turns.context_window import Meter, WithDocuments, fit_request, measure_draft
from engine.turns.runner import TurnRunner

T = TypeVar("T")
FLUSH_EVERY_S = 1.0  # the recorder also throttles itself; this covers a stream that pauses

# A turn's documents: opened, or what opens them once its branch is read (the window's, before the fit).
Documents = TurnDocuments | Callable[[], Awaitable[TurnDocuments | None]] | None
log = logging.getLogger("engine.session")


class BeginOptions(TypedDict, total=False):
    """`ChatSession.begin`'s options (`open_turn` and `open_turn_async` pass them on)."""

    model: str  # the model's name, stored with the turn ("" when unknown)
    approver: Approver  # asks about each tool call (default: deny them all)
    max_tool_rounds: int | None  # None: the runner's own limit
    ask_again: bool  # ignore the conversation's "always allow" choices for this turn


class TurnOptions(BeginOptions, total=False):
    """What `open_turn` and `open_turn_async` both take: `prepare`'s, the documents, `begin`'s."""

    tools: ToolSet | None
    schema: Schema | None
    policy: ContextPolicy | None
    documents: Documents


@dataclass(frozen=True, slots=True)
class Ask:
    """What the user asked for: a new message, another answer to a question, or an edited question."""

    kind: Literal["send", "regenerate", "edit"]
    text: str = ""
    message_id: int | None = None  # regenerate: the answer (or its question); edit: the question
    images: tuple[ImageData, ...] = ()  # send: the pictures the new message carries
    attach: tuple[Path, ...] = ()  # send: files attached to the message (then the conversation's)
    collection: str | None = None  # the collection to answer from (None: the conversation's)

    @classmethod
    def send(
        cls, text: str, images: Sequence[ImageData] = (), *, attach: Sequence[Path] = (), collection: str | None = None
    ) -> Ask:
        return cls("send", text, images=tuple(images), attach=tuple(attach), collection=collection or None)

    @classmethod
    def regenerate(cls, message_id: int) -> Ask:
        return cls("regenerate", message_id=message_id)

    @classmethod
    def edit(cls, message_id: int, text: str) -> Ask:
        return cls("edit", text, message_id)


@dataclass
class Plan:
    """A turn about to be stored and run: its request (fitted once `fit` ran), holding the writer lock."""

    ask: Ask
    request: Request
    policy: ContextPolicy
    tools: ToolSet | None
    lock: ConversationLock | None
    fitted: Fit | None = None
    sources: Sources | None = None  # the documents' passages the question carries
    apart: bool = False  # an API client's turn (`of_request`): see `Turn.apart`

    @classmethod
    def of_request(cls, request: Request) -> Plan:
        """The plan of an API request (`ember serve`): the request is the prompt, sent as it is
        (`verbatim`) or refused by the fit; its question is its last user message."""
        request = request.with_(verbatim=True)
        asked = next((m for m in reversed(request.messages) if m.get("role") == "user"), None)
        text = str(asked.get("content") or "") if asked is not None else ""
        return cls(Ask.send(text), request, ContextPolicy.STOP, None, None, apart=True)

    def fit(self, backend: Backend, documents: TurnDocuments | None = None) -> Plan:
        """This plan with its request fitted to `backend`'s context (pure: it only counts), the passages
        of `documents` that fit put into the question first. Raises the policy's `ContextOverflowError`
        (the message must not be stored) or a template's `ConfigError`."""
        plan = self
        if documents:
            messages, sources = documents.apply(backend, self.request.messages, self.request.max_tokens)
            plan = replace(self, request=self.request.with_(messages=tuple(messages)), sources=sources)
        caps = backend.capabilities
        refuse_unseen(caps.vision, backend.name, plan.request.messages, caps.vision_note)
        request, fitted = fit_request(backend, plan.request, plan.policy)
        return replace(plan, request=request, fitted=fitted)

    @property
    def fit_result(self) -> Fit:
        return self.fitted if self.fitted is not None else unmeasured(self.request.messages)

    def release(self) -> None:
        """Give the conversation back (the turn was refused before anything was stored)."""
        if self.lock is not None:
            self.lock.release()


class ChatSession:
    """The open conversation over one history store, and every turn in it."""

    def __init__(
        self,
        store: HistoryStore,
        conversation_id: int | None = None,
        *,
        saved: bool = True,
        lock_wait_s: float = 0.0,
        on_wait: Callable[[], None] | None = None,
    ) -> None:
        self.store = store
        self.saved = saved  # False: history is off, the store is a scratch file
        self.lock_wait_s = lock_wait_s  # the window never waits; `ember chat` waits for another writer
        self.on_wait = on_wait
        self._scratch: Path | None = None
        self._thread: HistoryThread | None = None
        self.state = ConversationState(store, conversation_id, self.io)  # its settings, its documents

    @classmethod
    def unsaved(cls, *, lock_wait_s: float = 0.0, on_wait: Callable[[], None] | None = None) -> ChatSession:
        """A session whose conversations are not kept (history off): a scratch store, removed on close."""
        folder = make_scratch()  # removed on close; one a killed process left is swept by the next
        try:
            store = HistoryStore(folder / "history.db")
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        session = cls(store, saved=False, lock_wait_s=lock_wait_s, on_wait=on_wait)
        session._scratch = folder
        return session

    def offload(self) -> None:
        """Do the async methods' history work on a thread of its own from now on (the window's session)."""
        if self._thread is None:
            self._thread = HistoryThread()

    async def io(self, fn: Callable[[], T]) -> T:
        """`fn()` (store work) on the history thread when the session has one, else here."""
        return fn() if self._thread is None else await self._thread.call(fn)

    def submit(self, fn: Callable[[], object]) -> None:
        """`fn()` on the history thread without waiting for it (in order with the rest), else here."""
        if self._thread is None:
            fn()
        else:
            self._thread.submit(fn)

    def close(self) -> None:
        if self._thread is not None:
            self._thread.close()  # what was asked of it (a turn's last record) is written first; then none
        self.store.close()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)

    # -- the open conversation -----------------------------------------------------------

    @property
    def conversation_id(self) -> int | None:
        """The open conversation (None: a fresh one, stored at its first message)."""
        return self.state.conversation_id

    @property
    def settings(self) -> ConversationSettings:
        """The open conversation's settings: as read when it opened or last written here."""
        return self.state.settings

    def new(self) -> None:
        self.state.open(None)

    def open(self, conversation_id: int, *, reveal: int | None = None) -> None:
        """Make `conversation_id` the open one (showing message `reveal`'s branch); its settings are read now."""
        conversation = self.store.conversation(conversation_id)  # NotFoundError before anything changes
        if reveal is not None:
            self.store.switch_version(reveal)
        self.state.open(conversation)

    def switch_version(self, message_id: int) -> None:
        self.store.switch_version(message_id)

    async def prepare_documents(
        self, ask: Ask, *, index_path: Path | None = None, opened: TurnDocuments | None = None
    ) -> TurnDocuments:
        """The documents `ask` is answered from (`ConversationState.documents`), read on a worker thread
        unless `opened` is a reading of the same (the window's meter reads ahead); the readable ones are
        remembered. Raises `DocsDatabaseError` for an unknown collection, `ModelLoadError` for its embedder.
        """
        files, collection = self.state.documents(ask.attach, ask.collection)
        docs = opened
        if docs is None or not docs.answers(files, collection):
            docs = await asyncio.to_thread(TurnDocuments.open, files, collection, index_path=index_path)
        try:
            await self.state.remember_documents(docs.attached, collection)
        except BaseException:  # cancelled: what this opened is closed here
            if docs is not opened:
                docs.close()
            raise
        return docs

    def path(self, *, upto: int | None = None) -> list[StoredMessage]:
        """The open conversation's active branch (or the one ending at `upto`), root first."""
        if self.conversation_id is None:
            return []
        return self.store.path(self.conversation_id, leaf_id=upto)

    def messages(
        self,
        settings: TurnSettings,
        *,
        replay_tools: bool = False,
        upto: int | None = None,
        path: list[StoredMessage] | None = None,
    ) -> list[Message]:
        """The model messages of the branch ending at `upto`: the system prompt first."""
        system = self.settings.system or settings.system_prompt
        branch = self.path(upto=upto) if path is None else path
        images = self.stored_images(branch).found
        return branch_messages(branch, system=system, replay_tools=replay_tools, images=images)

    def stored_images(self, branch: Sequence[StoredMessage]) -> StoredImages:
        """The stored images of the branch's questions, by message id (`found`), the damaged ones apart."""
        return read_images(self.store, [m.id for m in branch if m.role == "user"])

    def policy(self, settings: TurnSettings, override: ContextPolicy | None = None) -> ContextPolicy:
        """The context policy in force: `override`, else the conversation's, else the model's."""
        return override or self.settings.context_policy or settings.context_policy

    # -- a turn --------------------------------------------------------------------------

    def prepare(
        self,
        ask: Ask,
        settings: TurnSettings,
        *,
        tools: ToolSet | None = None,
        schema: Schema | None = None,
        policy: ContextPolicy | None = None,
    ) -> Plan:
        """The request for `ask`, built from the stored branch (read once), not stored yet.

        Holds the conversation's writer lock from here (HistoryError when another writer
        keeps it past the wait), so nothing changes the branch between this read and `begin`.
        """
        lock = self._lock(self.conversation_id) if self.conversation_id is not None else None
        with _given_back(lock):
            messages = self._messages_for(ask, settings, replay_tools=bool(tools))
            specs = tuple(tools.specs()) if tools else None
            request = make_request(
                messages, tools=specs, sampling=settings.sampling, max_tokens=settings.max_tokens, schema=schema
            )
        return Plan(ask, request, self.policy(settings, policy), tools or None, lock)

    def _messages_for(self, ask: Ask, settings: TurnSettings, *, replay_tools: bool) -> list[Message]:
        if ask.kind == "send":
            return [*self.messages(settings, replay_tools=replay_tools), _question(ask.text, ask.images)]
        if ask.message_id is None or self.conversation_id is None:
            raise HistoryError("no conversation is open")
        target = self.store.message(ask.message_id)
        if ask.kind == "edit":
            if target.role != "user":
                raise HistoryError(f"message {ask.message_id} is not a user message")
            head = (
                self.messages(settings, replay_tools=replay_tools, upto=target.parent_id)
                if target.parent_id is not None
                else self.messages(settings, path=[])
            )
            return [*head, _question(ask.text, self.stored_images([target]).found.get(target.id, []))]
        question = target.parent_id if target.role == "assistant" else target.id
        if question is None:
            raise HistoryError(f"message {ask.message_id} does not answer a user message")
        return self.messages(settings, replay_tools=replay_tools, upto=question)

    def begin(self, plan: Plan, **options: Unpack[BeginOptions]) -> Turn:
        """Store the question of `plan` (or open another answer) and return the turn to run."""
        model = options.get("model", "")
        with _given_back(plan.lock):
            conversation_id = self._ensure_conversation(model)
            lock = plan.lock or self._lock(conversation_id)
        recorder = TurnRecorder(self.store, conversation_id, model=model)
        with _given_back(lock):
            _start(recorder, plan.ask)
        use, stored = None, frozenset[str]()
        if plan.tools is not None:
            stored = frozenset(self.settings.tools_always)
            kept = () if options.get("ask_again", False) else stored
            use = ToolUse(plan.tools, options.get("approver", deny_all), ToolPermissions(kept))
            if (rounds := options.get("max_tool_rounds")) is not None:
                use.max_rounds = rounds
        return Turn(
            self, plan.request, plan.fit_result, plan.policy, recorder, lock, use, stored, plan.sources, plan.apart
        )

    def begin_request(self, plan: Plan, *, model: str = "") -> Turn:
        """Record an API request's turn (`ember serve --record`): a new conversation holding the
        request's messages before its question (the system prompt in its settings; tool calls and
        results are the client's, not stored), then `begin` stores the question."""
        past = plan.request.messages
        last = max((i for i, m in enumerate(past) if m.get("role") == "user"), default=len(past))
        past = past[:last]
        self.new()
        system = "\n\n".join(str(m.get("content") or "") for m in past if m.get("role") == "system")
        if system:
            self.state.update_settings(system=system)
        conversation_id, parent = self._ensure_conversation(model), None
        for message in past:
            role, content = message["role"], str(message.get("content") or "")
            if (role == "user" or role == "assistant") and content.strip():
                parent = self.store.add_message(conversation_id, role, content, parent_id=parent)
        return self.begin(plan, model=model)  # the question goes after the active leaf: the last of these

    def open_turn(self, backend: Backend, ask: Ask, settings: TurnSettings, **options: Unpack[TurnOptions]) -> Turn:
        """prepare → documents → fit → begin on this thread: the turn for `ask`, stored, ready to run. Raises,
        before anything is stored: the policy's `ContextOverflowError`, a template's `ConfigError`, or
        `HistoryError` (the conversation cannot be written now)."""
        return _at_once(self._open_turn(backend, ask, settings, options))

    async def open_turn_async(
        self, engine: Engine, ask: Ask, settings: TurnSettings, **options: Unpack[TurnOptions]
    ) -> Turn:
        """`open_turn` on an event loop: store work through `io`, the fit on the engine's counting
        thread (none yet without a model: `Turn.refit_async` measures it once the model is there)."""
        return await self._open_turn(engine, ask, settings, options)

    async def _open_turn(self, on: Backend | Engine, ask: Ask, settings: TurnSettings, opts: TurnOptions) -> Turn:
        """Both faces' one path. On an `Engine` (the window's) store work goes through `io` and the fit to
        the engine's counting thread; with a `Backend` (`ember chat`'s) each step runs here, at once."""
        io = self.io if isinstance(on, Engine) else _here

        async def measure(fit: Callable[[Backend], Plan]) -> Plan | None:
            return await on.measure(fit) if isinstance(on, Engine) else fit(on)

        tools, schema, policy = opts.pop("tools", None), opts.pop("schema", None), opts.pop("policy", None)
        documents = opts.pop("documents", None)
        begin: BeginOptions = opts  # what is left is `begin`'s
        plan = await io(partial(self.prepare, ask, settings, tools=tools, schema=schema, policy=policy))
        with _given_back(plan.lock):  # the documents are opened once the branch is read (the window's: a worker)
            docs = documents if documents is None or isinstance(documents, TurnDocuments) else await documents()
            plan = await measure(partial(plan.fit, documents=docs)) or plan
        return await io(partial(self.begin, plan, **begin))

    async def meter_async(
        self, engine: Engine, draft: str, settings: TurnSettings, documents: WithDocuments | None = None
    ) -> Meter | None:
        """The composer's meter for `draft` after the open conversation (None: no model, or it cannot count);
        `documents` adds the next message's documents as the turn will."""
        messages, policy = await self.io(lambda: (self.messages(settings), self.policy(settings)))
        return await engine.measure(
            lambda b: measure_draft(b, messages, draft, policy, settings.max_tokens, documents=documents)
        )

    async def context_cut_async(
        self, engine: Engine, settings: TurnSettings, path: list[StoredMessage] | None = None
    ) -> Fit | None:
        """Where the model's view of the open conversation (its branch `path`) begins; None when unknown."""
        messages, policy = await self.io(lambda: (self.messages(settings, path=path), self.policy(settings)))
        if not messages:
            return None
        request = make_request(messages, max_tokens=settings.max_tokens)
        try:
            return await engine.measure(lambda b: fit_request(b, request, policy)[1])
        except (ContextOverflowError, ConfigError):
            return None  # the next message reports it

    def _lock(self, conversation_id: int) -> ConversationLock:
        lock = ConversationLock(self.store.db_path, conversation_id, wait_s=self.lock_wait_s, on_wait=self.on_wait)
        try:
            lock.acquire()
        except ConversationBusy as exc:
            if self.lock_wait_s:
                raise
            raise HistoryError(
                "another reply is being written in this conversation right now "
                "(`ember chat`); try again when it is done"
            ) from exc
        return lock

    def _ensure_conversation(self, model: str) -> int:
        conversation_id = self.conversation_id
        if conversation_id is None:
            conv = self.store.create_conversation(model=model, settings=self.settings.to_stored())
            self.state.open(conv)
            conversation_id = conv.id
        return conversation_id

    # -- titles --------------------------------------------------------------------------

    def first_exchange(self) -> tuple[int, str, str] | None:
        """(conversation, question, answer) when the open conversation is one complete, auto-titled exchange."""
        if self.conversation_id is None or not self.store.conversation(self.conversation_id).title_is_auto:
            return None
        path = self.store.path(self.conversation_id)
        if [m.role for m in path] != ["user", "assistant"] or path[1].status != "complete":
            return None
        return self.conversation_id, path[0].content, path[1].content


async def open_request_async(
    engine: Engine,
    request: Request,
    *,
    documents: TurnDocuments | None = None,
    record: ChatSession | None = None,
    model: str = "",
) -> Turn:
    """An API request's turn (`ember serve`): the request is the prompt (`Plan.of_request`), measured
    like any turn (a raw text prompt is the backend's own to check) and refused whole when it does not
    fit; with a `record` session (`--record`) stored as a new conversation (`begin_request`)."""
    plan = Plan.of_request(request)
    if request.prompt is None:
        try:
            plan = await engine.measure(partial(plan.fit, documents=documents)) or plan
        except ContextFullError as exc:  # its own words advise the window's context policies
            raise ContextOverflowError(
                f"the request ({exc.tokens:,} tokens) does not fit the model's {exc.n_ctx:,}-"
                f"token context, which keeps one token for the reply"
            ) from None
    if record is not None and any(m["role"] == "user" for m in request.messages):
        try:
            return await record.io(partial(record.begin_request, plan, model=model))
        except (HistoryError, OSError) as exc:
            log.warning("could not record an API request in the history: %s", exc)
    return Turn(None, plan.request, plan.fit_result, plan.policy, None, None, sources=plan.sources, apart=True)


async def _here(fn: Callable[[], T]) -> T:
    """`fn()` on this thread: the sync faces' steps."""
    return fn()


def _at_once(steps: Coroutine[Any, Any, T]) -> T:
    """The result of `steps`, which never wait (a sync face runs every step on its own thread)."""
    try:
        steps.send(None)
    except StopIteration as done:
        return done.value
    steps.close()
    raise RuntimeError("a sync call's step waited (documents that open on another thread?)")


def _attributed(attributing: AnswerSources | None, event: Event) -> Iterator[Event]:
    """`event`, after the sources of each paragraph of the answer it completes."""
    if attributing is not None and (supported := attributing.before(event)) is not None:
        yield supported
    yield event


@contextlib.contextmanager
def _given_back(lock: ConversationLock | None) -> Generator[None]:
    """The conversation given back when the body fails: nothing of the turn was stored."""
    try:
        yield
    except BaseException:
        if lock is not None:
            lock.release()
        raise


def _question(text: str, images: Sequence[ImageData]) -> Message:
    asked: Message = {"role": "user", "content": text}
    if images:
        asked["images"] = list(images)
    return asked


def _start(recorder: TurnRecorder, ask: Ask) -> None:
    if ask.kind == "send":
        recorder.begin(ask.text, ask.images)
    elif ask.kind == "edit":
        assert ask.message_id is not None
        recorder.begin_edit(ask.message_id, ask.text)
    else:
        assert ask.message_id is not None
        recorder.begin_regenerate(ask.message_id)


@dataclass
class Turn:
    """One stored question being answered: run it, and every event is recorded before it is shown."""

    session: ChatSession | None  # None: an API request not recorded
    request: Request
    fit: Fit
    policy: ContextPolicy
    recorder: TurnRecorder | None
    lock: ConversationLock | None
    tools: ToolUse | None = None
    _always: frozenset[str] = field(default_factory=frozenset[str])  # the stored "always allow" list
    sources: Sources | None = None  # the documents the question carries: the turn's first event
    # An API client's turn (`ember serve`): only its own cancel stops it (not the window's Stop);
    # its tool calls are its answer, not stored; a history failure is logged, never fails it.
    apart: bool = False

    @property
    def user_message_id(self) -> int | None:
        return self.recorder.user_message_id if self.recorder is not None else None

    def run(self, backend: Backend, cancel: CancelToken | None = None) -> Iterator[Event]:
        """Run the turn here (the CLI's thread owns the backend); events are recorded as they pass."""
        try:
            with reply_streaming():  # an indexer in this process leaves the model its threads meanwhile
                first, attributing = self._opening()
                for raw in chain(first, TurnRunner(backend, self.tools).run(self.request, cancel)):
                    for event in _attributed(attributing, raw):
                        self.record(event)
                        yield event
        except KeyboardInterrupt:
            self.close("stopped")
            raise
        finally:
            self.close()

    async def run_async(
        self, engine: Engine, cancel: CancelToken | None = None, *, events: AsyncGenerator[Event] | None = None
    ) -> AsyncIterator[Event]:
        """`run` on `engine`'s model thread (or with `events` from elsewhere: the server's forced tool
        calls). Each event goes to the recorder before it is shown, written in order on the session's
        history thread (if any) while the stream goes on (flushed each second); the turn ends once
        all of it is written."""
        if events is None:
            events = engine.run_turn(self.request, cancel, tools=self.tools, apart=self.apart)
        flusher = asyncio.ensure_future(self._flush_forever())
        streaming = reply_streaming()
        streaming.__enter__()  # the window's indexer leaves the model its threads while this streams
        try:
            first, attributing = self._opening()
            for event in first:
                self._soon(partial(self.record, event))
                yield event
            async for raw in events:
                for event in _attributed(attributing, raw):
                    self._soon(partial(self.record, event))
                    yield event
        finally:
            streaming.__exit__(None, None, None)
            flusher.cancel()
            await events.aclose()
            await self.close_async()

    def _opening(self) -> tuple[tuple[Event, ...], AnswerSources | None]:
        """What both runs show first (the sources), and what then finds each paragraph's sources."""
        if self.sources is None:
            return (), None
        return (self.sources,), AnswerSources(self.sources)

    async def refit_async(self, engine: Engine) -> None:
        """Fit a turn stored before a model was loaded; raises the refusal (the turn then records it)."""
        if self.fit.measured:
            return
        fitted = await engine.measure(lambda b: fit_request(b, self.request, self.policy))
        if fitted is not None:
            self.request, self.fit = fitted

    def adopt(self, settings: TurnSettings, conversation_system: str = "") -> None:
        """Run with `settings` (the model's, known only once it loaded): sampling, reply cap, system prompt.

        A turn stored while its model loaded was prepared with the settings known then; the
        model's own (recommended, built-in, saved) apply from the moment it runs. The
        conversation's own system prompt (`conversation_system`) wins over the model's. A turn
        already fitted to a model keeps its request (it was prepared with that model's settings).
        """
        if self.fit.measured:
            return
        messages = list(self.request.messages)
        if messages and messages[0].get("role") == "system":
            messages = messages[1:]
        system = conversation_system or settings.system_prompt
        if system.strip():
            messages.insert(0, {"role": "system", "content": system})
        self.request = self.request.with_(
            messages=tuple(messages), sampling=settings.sampling, max_tokens=settings.max_tokens
        )
        self.fit = unmeasured(self.request.messages)  # measured by `refit_async`

    def record(self, event: Event) -> None:
        """Record an event: the turn's own as they pass, or one the front end made (no model, say)."""
        if self.recorder is None or (self.apart and isinstance(event, ToolEvent)):
            return
        self._history(partial(self.recorder.on_event, event))

    async def record_async(self, event: Event) -> None:
        await self._io(partial(self.record, event))

    async def close_async(self, status: Literal["stopped", "interrupted"] = "interrupted") -> None:
        """`close` through the session's `io`; it runs to its end even when the caller is cancelled."""
        await asyncio.shield(self._io(partial(self.close, status)))

    async def _flush_forever(self) -> None:
        while self.recorder is not None:
            await asyncio.sleep(FLUSH_EVERY_S)
            await self._io(partial(self._history, self.recorder.flush))

    async def _io(self, fn: Callable[[], None]) -> None:
        return fn() if self.session is None else await self.session.io(fn)

    def _soon(self, fn: Callable[[], None]) -> None:
        return fn() if self.session is None else self.session.submit(fn)

    def close(self, status: Literal["stopped", "interrupted"] = "interrupted") -> None:
        """End the turn: an unfinished one is kept as `status`; new "always allow" choices are saved."""
        if self.session is None or self.recorder is None or self.lock is None:
            return
        try:
            self._history(partial(self.recorder.abandon, status))
            if self.tools is not None and frozenset(self.tools.permissions.always) != self._always:
                self._always = frozenset(self.tools.permissions.always)
                with contextlib.suppress(HistoryError):  # the choice holds for this run either way
                    self.session.state.update_settings(
                        self.recorder.conversation_id, tools_always=tuple(sorted(self._always))
                    )
        finally:
            self.lock.release()

    def _history(self, write: Callable[[], None]) -> None:
        """`write()`; an API turn's failure is logged (the client's answer goes on without its record)."""
        if not self.apart:
            return write()
        try:
            write()
        except (HistoryError, OSError) as exc:
            log.warning("could not record an API reply in the history: %s", exc)
