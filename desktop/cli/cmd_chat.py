"""`ember chat`: one turn from the command line, streamed to stdout (or as JSON events).

With `--schema FILE` the turn is structured: the reply must be JSON matching the schema.
Plain output is then the value, pretty-printed on stdout, with retries reported on stderr;
with `--events`, a `structured_retry` line per retry, then `json` and `done`, or one `error`
line (kind "structured_output", the last error) and exit 3. A schema file that cannot be
read, is not JSON or is not a valid JSON Schema exits 2 before any model is loaded. When the
schema's grammar cannot be used, decoding is unconstrained and that is said (`ember: note:`
on stderr, a `notice` line with `--events`); the value is still validated.

Both kinds run through the same turn runner and are recorded in history the same way
(`--no-history`, `-c`, `--conversation`): the user's message is committed before the
reply; the answer (a structured value as the app shows it, a fenced json block) at the end.
With `--tools` the turn may call tools, each approved first (desktop/cli/chat_tools.py);
`--tools` and `--schema` cannot be combined.
Every kind is fitted to the model's context first (`--context-policy`, else the
conversation's, else the model's: engine/turns/context_policy.py); a message that cannot fit
even alone is refused (exit 3) before it is stored.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from collections.abc import Iterator
from itertools import chain
from typing import Any

from desktop.cli.arg_checks import ctx_arg, prompt_arg, seed_arg, temperature_arg, text_arg, threads_arg
from desktop.cli.chat_docs import add_doc_options, open_docs, print_sources
from desktop.cli.chat_tools import add_tool_options, build_toolset, emit_tool_text, tool_turn
from desktop.cli.cmd_history import ChatHistory, add_chat_options
from desktop.cli.common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TURN_ERROR,
    EXIT_USAGE,
    emit_json,
    fail,
    open_backend,
    positive_int,
    run_settings,
)
from desktop.cli.thinking_output import ThinkingPrinter
from desktop.core.context_choice import policy_for, preview_messages, refusal, with_policy
from desktop.core.documents import TurnDocuments, remember_documents
from desktop.core.settings_resolver import TurnSettings
from engine.backends.base import Backend, CancelToken, Message, Request, Schema, make_request
from engine.errors import ConfigError, ContextOverflowError, EngineError
from engine.events import (
    ContentDelta,
    Notice,
    Recovery,
    Sources,
    StructuredRetry,
    StructuredValue,
    ThinkingDelta,
    TurnDone,
    TurnError,
    TurnErrorKind,
    TurnStats,
)
from engine.history.types import HistoryError
from engine.tools.registry import ToolSet
from engine.turns.context_policy import ContextPolicy
from engine.turns.context_window import fit_for
from engine.turns.runner import TurnRunner, error_kind
from engine.turns.structured import MAX_STRUCTURED_RETRIES, load_schema
from engine.turns.tool_events import AnyEvent, tool_event_to_json
from models.library.memory import KV_CACHE_TYPES
from models.library.settings import ModelSettings


def register(sub: Any) -> None:
    p = sub.add_parser("chat", help="send one message and stream the reply")
    p.add_argument("prompt", metavar="PROMPT", type=prompt_arg, help="the message to send")
    p.add_argument("--model", default="default", help="GGUF path or 'default' (with openai: the model name)")
    p.add_argument("--backend", default="llama", help="llama (default), script:FILE or openai:URL")
    p.add_argument("--system", type=text_arg, default=None, help="system prompt")
    p.add_argument("--temperature", type=temperature_arg, default=None, help="sampling temperature (0 = greedy)")
    p.add_argument("--seed", type=seed_arg, default=None, help="sampling seed (default: random)")
    p.add_argument("--max-tokens", type=positive_int, default=None,
                   help="reply length limit (default: the model's setting, else up to the context size)")
    p.add_argument("--ctx", type=ctx_arg, default=None, help="context length in tokens (default 4096)")
    p.add_argument("--gpu-layers", type=int, default=None, help="layers to offload to the GPU (-1 = all)")
    p.add_argument("--threads", type=threads_arg, default=None, help="CPU threads")
    p.add_argument("--kv-cache", choices=tuple(KV_CACHE_TYPES), default=None,
                   help="KV cache type: f16 (default), q8_0 or q4_0 (less memory for the context)")
    p.add_argument("--events", action="store_true", help="print one JSON object per event")
    p.add_argument("--show-thinking", action="store_true", help="print thinking to stderr")
    p.add_argument("--api-key-env", metavar="VAR", help="with openai: read the API key from this variable")
    p.add_argument("--schema", metavar="FILE", default=None, help="reply with JSON matching this JSON Schema file")
    p.add_argument("--context-policy", choices=[c.value for c in ContextPolicy], default=None,
                   help="when the conversation outgrows the context: truncate-middle (keep the start and the "
                        "latest turns), rolling (latest only) or stop (default: the conversation's, else the model's)")
    add_chat_options(p)
    add_tool_options(p)
    add_doc_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.schema is not None and args.tools:
        return fail("--schema and --tools cannot be combined")
    try:
        # Checked before a model loads: a bad schema file or conversation id fails fast.
        schema: Schema | None = load_schema(args.schema) if args.schema is not None else None
        settings = run_settings(args)
        history = ChatHistory.open(args)
    except EngineError as exc:
        return fail(str(exc))
    with history:
        try:  # checked before a model loads too; MCP servers start here
            tools = build_toolset(args, history.store.db_path if history.store else None) if args.tools else None
        except EngineError as exc:
            return fail(str(exc))
        try:
            docs = open_docs(args, _conversation_settings(history))  # files are read before a model loads
            backend = open_backend(args, settings)
        except EngineError as exc:
            if tools is not None:
                tools.close()
            return fail(str(exc))
        try:
            note_clamped_context(settings.model.context_length, backend)
            return _chat(args, backend, settings, schema, history, tools, docs)
        finally:
            backend.close()
            docs.close()
            if tools is not None:
                tools.close()


def _chat(args: argparse.Namespace, backend: Backend, settings: TurnSettings, schema: Schema | None,
          history: ChatHistory, tools: ToolSet | None, docs: TurnDocuments) -> int:
    system = settings.system_prompt or None
    policy = _context_policy(args, history, settings.model)
    # Checked before anything is stored: a message that cannot be sent never enters the history.
    problem = refusal(backend, preview_messages(history.store, history.conversation_id, args.prompt, system),
                      policy, settings.max_tokens)
    if problem:
        sys.stderr.write(f"ember: {problem}\n")
        return EXIT_TURN_ERROR
    # With history, the context is the conversation's active branch ending at this prompt
    # (begin() waits for another `chat -c` on the conversation to finish its turn first).
    messages = history.begin(args.prompt, system=system, model=backend.name, join_roles=False) or settings.messages(
        [{"role": "user", "content": args.prompt}])
    _keep_settings(args, history, policy, docs)
    cancel = CancelToken()
    try:
        first: list[Sources] = []
        if docs:  # the passages that fit go into the question; the turn starts with its sources
            messages, sources = docs.apply(backend, messages, settings.max_tokens)
            first.append(sources)
        events = chain(first, _fitted_turn(args, backend, messages, policy, settings, schema, cancel, history,
                                           tools))
        # The recorder passes tool events through unrecorded (chat_tools records them).
        return _print_turn(history.wrap(events), args)  # pyright: ignore[reportArgumentType]
    except KeyboardInterrupt:
        cancel.cancel()
        history.stopped()
        if schema is None:
            sys.stdout.write("\n")
        return EXIT_INTERRUPTED


def _fitted_turn(args: argparse.Namespace, backend: Backend, messages: list[Message], policy: ContextPolicy,
                 settings: TurnSettings, schema: Schema | None, cancel: CancelToken, history: ChatHistory,
                 tools: ToolSet | None) -> Iterator[AnyEvent]:
    """The turn's events, its messages fitted to the context first under `policy`."""
    try:
        fit = fit_for(backend, messages, policy, settings.max_tokens)
    except (ContextOverflowError, ConfigError) as exc:
        # Possible only when another writer grew the conversation after the check above:
        # the turn ends with the error, recorded like any other.
        return iter([TurnError(error_kind(exc), str(exc), TurnStats())])
    if fit.cut:
        sys.stderr.write(f"ember: {len(fit.dropped)} earlier messages are outside the model's context ({policy})\n")
    request = make_request(fit.messages, sampling=settings.sampling, max_tokens=settings.max_tokens, schema=schema)
    return _turn_events(args, backend, request, cancel, history, tools)


def _conversation_settings(history: ChatHistory) -> dict[str, Any] | None:
    if history.store is None or history.conversation_id is None:
        return None
    try:
        return dict(history.store.conversation(history.conversation_id).settings)
    except (HistoryError, sqlite3.Error):  # recording reports it; the defaults apply
        return None


def _context_policy(args: argparse.Namespace, history: ChatHistory, model: ModelSettings) -> ContextPolicy:
    return policy_for(_conversation_settings(history), model, args.context_policy)


def _keep_settings(args: argparse.Namespace, history: ChatHistory, policy: ContextPolicy,
                   docs: TurnDocuments) -> None:
    """Remember `--context-policy`, `--docs` and the attached files as the conversation's own."""
    if not (args.context_policy or args.docs or docs.attached) or history.store is None \
            or history.conversation_id is None:
        return
    try:
        settings = history.store.conversation(history.conversation_id).settings
        if args.context_policy:
            settings = with_policy(settings, policy)
        settings = remember_documents(settings, docs, args.docs)
        history.store.update_conversation(history.conversation_id, settings=settings)
    except (HistoryError, sqlite3.Error) as exc:
        sys.stderr.write(f"ember: could not save the conversation's settings: {exc}\n")


def _turn_events(args: argparse.Namespace, backend: Backend, request: Request, cancel: CancelToken,
                 history: ChatHistory, tools: ToolSet | None) -> Iterator[AnyEvent]:
    if tools is None:
        return TurnRunner(backend).run(request, cancel)
    recorder = history.recorder  # a turn with tools: desktop/cli/chat_tools.py
    return tool_turn(args, backend, request, cancel, tools, history.store, history.conversation_id,
                     lambda: recorder.assistant_message_id if recorder else None)


def note_clamped_context(asked: int, backend: Backend) -> None:
    """Say so when the model's trained context is below the context asked for (it is used instead)."""
    used = backend.capabilities.context_size
    if 0 < used < asked:
        sys.stderr.write(f"ember: note: the model was trained on {used} tokens of context; using {used}, "
                         f"not {asked}\n")


def _print_turn(events: Any, args: argparse.Namespace) -> int:
    status = EXIT_OK
    thinking = ThinkingPrinter(sys.stderr) if args.show_thinking else None
    sources: Sources | None = None
    for event in events:
        if args.events:
            emit_json(tool_event_to_json(event))
        elif isinstance(event, Sources):
            sources = event  # listed after the answer
        else:
            _emit_text(event, args, thinking)
        if isinstance(event, TurnError):
            status = EXIT_USAGE if event.kind is TurnErrorKind.CONFIG else EXIT_TURN_ERROR
    if sources is not None:
        print_sources(sources)
    return status


def _emit_text(event: AnyEvent, args: argparse.Namespace, thinking: ThinkingPrinter | None) -> None:
    structured = args.schema is not None
    if thinking is not None and not isinstance(event, ThinkingDelta):
        thinking.close()  # the answer (or the end) follows: set the thinking apart first
    match event:
        case ContentDelta(text=text):
            sys.stdout.write(text)
            sys.stdout.flush()
        case ThinkingDelta(text=text) if thinking is not None:
            thinking.thinking(text)
        case Recovery():
            sys.stderr.write("ember: the reply was empty; asking once more…\n")
        case Notice(text=text):
            sys.stderr.write(f"ember: note: {text}\n")
        case StructuredRetry(attempt=attempt, error=error):
            sys.stderr.write(f"ember: the reply was not valid: {error}; asking again "
                             f"(attempt {attempt} of {1 + MAX_STRUCTURED_RETRIES})…\n")
        case StructuredValue(value=value):
            sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")
        case TurnDone() if not structured:
            sys.stdout.write("\n")
        case TurnError(kind=kind, message=message):
            if kind is TurnErrorKind.STRUCTURED_OUTPUT:
                message = f"no valid JSON after {1 + MAX_STRUCTURED_RETRIES} attempts: {message}"
            elif not structured:
                sys.stdout.write("\n")
            sys.stderr.write(f"ember: {message}\n")
        case _:
            emit_tool_text(event)
