"""`ember chat`: one turn from the command line, streamed to stdout (or as JSON events).

With `--schema FILE` the turn is structured: the reply must be JSON matching the schema.
Plain output is then the value, pretty-printed on stdout, with retries reported on stderr;
with `--events`, a `structured_retry` line per retry, then `json` and `done`, or one `error`
line (kind "structured_output", the last error) and exit 3. A schema file that cannot be
read, is not JSON or is not a valid JSON Schema exits 2 before any model is loaded. When the
schema's grammar cannot be used, decoding is unconstrained and that is said (`ember: note:`
on stderr, a `notice` line with `--events`); the value is still validated.

Every kind runs through the one session the window uses too (engine/session): recorded in
history the same way (`--no-history`, `-c`, `--conversation`): the user's message is
committed before the reply; the answer (a structured value as the app shows it, a fenced
json block) and its tool calls at the end. With `--tools` the turn may call tools, each
approved first (desktop/cli/chat_tools.py); `--tools` and `--schema` cannot be combined.
The request actually sent (system prompt, tools' descriptions, replayed tool calls and
results, the new message) is fitted to the model's context first (`--context-policy`, else
the conversation's, else the model's: engine/turns/context_policy.py); a message that
cannot be sent is refused (exit 3) before anything is stored.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from desktop.cli.arg_checks import ctx_arg, prompt_arg, seed_arg, temperature_arg, text_arg, threads_arg
from desktop.cli.chat_docs import add_doc_options, open_docs, print_sources
from desktop.cli.chat_images import add_image_options, read_images
from desktop.cli.chat_tools import TerminalApprover, add_tool_options, build_toolset, result_preview
from desktop.cli.cmd_history import add_chat_options, chat_session
from desktop.cli.common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TURN_ERROR,
    EXIT_USAGE,
    emit_json,
    fail,
    note_base_model,
    open_backend,
    positive_int,
    run_settings,
)
from desktop.cli.thinking_output import ThinkingPrinter
from engine.api.conversations import MAX_STRUCTURED_RETRIES, load_schema
from engine.api.documents import TurnDocuments
from engine.api.errors import ConfigError, ContextOverflowError, EngineError
from engine.api.models import AUTO_GPU_LAYERS, DEFAULT_CONTEXT_LENGTH, KV_CACHE_TYPES
from engine.api.session import Ask, ChatSession, TurnSettings
from engine.api.text import strict_dumps
from engine.api.tools import ToolSet
from engine.api.values import (
    Backend,
    CancelToken,
    ContentDelta,
    ContextPolicy,
    Event,
    HistoryError,
    Notice,
    Recovery,
    Schema,
    Sources,
    StructuredRetry,
    StructuredValue,
    ThinkingDelta,
    ToolDenied,
    ToolLimit,
    ToolResult,
    TurnDone,
    TurnError,
    TurnErrorKind,
    event_to_json,
)


def register(sub: Any) -> None:
    p = sub.add_parser("chat", help="send one message and stream the reply")
    p.add_argument("prompt", metavar="PROMPT", type=prompt_arg, help="the message to send")
    p.add_argument("--model", default="default", help="GGUF path or 'default' (with openai: the model name)")
    p.add_argument("--backend", default="llama", help="llama (default), script:FILE or openai:URL")
    p.add_argument("--system", type=text_arg, default=None, help="system prompt")
    p.add_argument("--temperature", type=temperature_arg, default=None, help="sampling temperature (0 = greedy)")
    p.add_argument("--seed", type=seed_arg, default=None, help="sampling seed (default: random)")
    p.add_argument(
        "--max-tokens",
        type=positive_int,
        default=None,
        help="reply length limit (default: the model's setting, else up to the context size)",
    )
    p.add_argument(
        "--ctx", type=ctx_arg, default=None, help=f"context length in tokens (default {DEFAULT_CONTEXT_LENGTH})"
    )
    p.add_argument(
        "--gpu-layers",
        type=int,
        default=None,
        help=f"layers to offload to the GPU ({AUTO_GPU_LAYERS} = as many as fit, 0 = CPU only)",
    )
    p.add_argument("--threads", type=threads_arg, default=None, help="CPU threads")
    p.add_argument(
        "--kv-cache",
        choices=tuple(KV_CACHE_TYPES),
        default=None,
        help="KV cache type: f16 (default), q8_0 or q4_0 (less memory for the context)",
    )
    p.add_argument("--events", action="store_true", help="print one JSON object per event")
    p.add_argument("--show-thinking", action="store_true", help="print thinking to stderr")
    p.add_argument("--api-key-env", metavar="VAR", help="with openai: read the API key from this variable")
    p.add_argument("--schema", metavar="FILE", default=None, help="reply with JSON matching this JSON Schema file")
    p.add_argument(
        "--context-policy",
        choices=[c.value for c in ContextPolicy],
        default=None,
        help="when the conversation outgrows the context: truncate-middle (keep the start and the "
        "latest turns), rolling (latest only) or stop (default: the conversation's, else the model's)",
    )
    add_chat_options(p)
    add_tool_options(p)
    add_doc_options(p)
    add_image_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.schema is not None and args.tools:
        return fail("--schema and --tools cannot be combined")
    try:
        # Checked before a model loads: a bad schema file or conversation id fails fast.
        schema: Schema | None = load_schema(args.schema) if args.schema is not None else None
        settings = run_settings(args)
        images = read_images(args)
        session = chat_session(args)
    except EngineError as exc:
        return fail(str(exc))
    tools: ToolSet | None = None
    backend: Backend | None = None
    docs: TurnDocuments | None = None
    try:
        # Checked before a model loads too; MCP servers start here, files are read here.
        tools = build_toolset(args, session.store.db_path if session.saved else None) if args.tools else None
        ask = Ask.send(args.prompt, images, attach=[Path(p) for p in args.attach], collection=args.docs)
        docs = open_docs(session, ask)
        backend = open_backend(args, settings)
        note_clamped_context(settings.model.context_length, backend)
        note_base_model(backend)
        _keep_choices(args, session)
        return _chat(args, backend, settings, schema, session, tools, docs, ask)
    except EngineError as exc:
        return fail(str(exc))
    finally:
        if backend is not None:
            backend.close()
        if docs is not None:
            docs.close()
        if tools is not None:
            tools.close()
        session.close()


def _chat(
    args: argparse.Namespace,
    backend: Backend,
    settings: TurnSettings,
    schema: Schema | None,
    session: ChatSession,
    tools: ToolSet | None,
    docs: TurnDocuments,
    ask: Ask,
) -> int:
    """One turn through the session: refused before anything is stored, or run and recorded."""
    try:  # the request actually sent (tools, documents included) is fitted before anything is stored
        turn = session.open_turn(
            backend,
            ask,
            settings,
            tools=tools,
            schema=schema,
            model=backend.name,
            approver=TerminalApprover(yes=args.yes),
            max_tool_rounds=args.max_tool_rounds,
            ask_again=args.ask_again,
            documents=docs,
        )
    except (ContextOverflowError, ConfigError) as exc:
        sys.stderr.write(f"ember: {exc}\n")
        return EXIT_TURN_ERROR
    if turn.fit.cut:
        sys.stderr.write(
            f"ember: {len(turn.fit.dropped)} earlier messages are outside the model's context ({turn.policy})\n"
        )
    cancel = CancelToken()
    try:
        return _print_turn(turn.run(backend, cancel), args, docs)
    except KeyboardInterrupt:
        cancel.cancel()
        turn.close("stopped")  # what streamed is kept, marked stopped
        if schema is None:
            sys.stdout.write("\n")
        return EXIT_INTERRUPTED


def _keep_choices(args: argparse.Namespace, session: ChatSession) -> None:
    """`--context-policy` and `--system`: remembered as the conversation's own (the session keeps its documents)."""
    changes: dict[str, object] = {}
    if args.context_policy:
        changes["context_policy"] = ContextPolicy(args.context_policy)
    if args.system:
        changes["system"] = args.system
    if session.settings.with_(**changes) == session.settings:
        return
    try:
        session.state.update_settings(**changes)
    except HistoryError as exc:
        sys.stderr.write(f"ember: could not save the conversation's settings: {exc}\n")


def note_clamped_context(asked: int, backend: Backend) -> None:
    """Say so when the model's trained context is below the context asked for (it is used instead)."""
    used = backend.capabilities.n_ctx
    if 0 < used < asked:
        sys.stderr.write(f"ember: note: the model was trained on {used} tokens of context; using {used}, not {asked}\n")


def _print_turn(events: Iterable[Event], args: argparse.Namespace, docs: TurnDocuments | None = None) -> int:
    status = EXIT_OK
    thinking = ThinkingPrinter(sys.stderr) if args.show_thinking else None
    sources: Sources | None = None
    answer: list[str] = []  # for the citation check
    for event in events:
        if isinstance(event, ContentDelta):
            answer.append(event.text)
        if args.events:
            emit_json(event_to_json(event))
        elif isinstance(event, Sources):
            sources = event  # listed after the answer
        else:
            _emit_text(event, args, thinking)
        if isinstance(event, TurnError):
            status = EXIT_USAGE if event.kind is TurnErrorKind.CONFIG else EXIT_TURN_ERROR
    if sources is not None:
        print_sources(sources, "".join(answer), docs.no_match if docs else "")
    return status


def _emit_text(event: Event, args: argparse.Namespace, thinking: ThinkingPrinter | None) -> None:
    """The plain-text view: the answer on stdout; thinking, notes and tool activity on stderr."""
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
            sys.stderr.write(
                f"ember: the reply was not valid: {error}; asking again "
                f"(attempt {attempt} of {1 + MAX_STRUCTURED_RETRIES})…\n"
            )
        case StructuredValue(value=value):
            sys.stdout.write(strict_dumps(value, indent=2, ensure_ascii=False) + "\n")
        case ToolResult(content=content, error=error):
            sys.stderr.write(f"ember: {'tool failed' if error else 'tool result'}: {result_preview(content)}\n")
        case ToolDenied():
            sys.stderr.write("ember: tool call denied\n")
        case ToolLimit(rounds=rounds):
            sys.stderr.write(f"ember: stopped after {rounds} rounds of tool calls\n")
        case TurnDone() if not structured:
            sys.stdout.write("\n")
        case TurnError(kind=kind, message=message):
            if kind is TurnErrorKind.STRUCTURED_OUTPUT:
                message = f"no valid JSON after {1 + MAX_STRUCTURED_RETRIES} attempts: {message}"
            elif not structured:
                sys.stdout.write("\n")
            sys.stderr.write(f"ember: {message}\n")
        case _:
            pass
