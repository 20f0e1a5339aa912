"""`ember chat --schema FILE PROMPT`: one structured reply, printed as JSON.

Plain output is the value, pretty-printed on stdout; retries are reported on stderr.
With `--events`: a `structured_retry` line per retry, then `json` and `done` on success,
or one `error` line (`kind` "structured_output", `message` the last error) and exit 3.
A schema file that cannot be read, is not JSON or is not a valid JSON Schema exits 2
before any model is loaded.

History is recorded as for a plain chat turn (`--no-history`, `-c`, `--conversation`):
the user's message is committed before the first attempt; the accepted JSON text becomes
the assistant's message and the turn completes; exhaustion or a backend error ends the
turn as an error with no answer kept; Ctrl+C ends it stopped.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from desktop.cmd_history import ChatHistory
from desktop.reply_format import fenced_json
from desktop.turn_runs import record
from engine.backend import Backend, Message, Sampling
from engine.errors import (
    ConfigError,
    EngineError,
    LLMError,
    StructuredOutputError,
)
from engine.events import ContentDelta, Notice, StructuredRetry, TurnDone, TurnError, event_to_json
from engine.structured import MAX_STRUCTURED_RETRIES, Schema, StructuredResult, StructuredRunner, load_schema
from engine.turn import error_kind

EXIT_OK, EXIT_USAGE, EXIT_TURN_ERROR, EXIT_INTERRUPTED = 0, 2, 3, 130


def run_schema_chat(args: argparse.Namespace) -> int:
    """The `chat --schema` branch of `ember chat`; returns the exit status."""
    from desktop.cmd_chat import open_backend, sampling_from  # cmd_chat imports this module lazily

    try:
        schema = load_schema(args.schema)  # checked first: a bad file never waits for a model load
        sampling = sampling_from(args)
        history = ChatHistory.open(args)  # as plain chat: a bad conversation id fails before a model loads
    except EngineError as exc:
        return _fail(str(exc))
    with history:
        try:
            backend = open_backend(args)
        except EngineError as exc:
            return _fail(str(exc))
        try:
            return _schema_turn(backend, schema, sampling, history, args)
        finally:
            backend.close()


def _schema_turn(backend: Backend, schema: Schema, sampling: Sampling, history: ChatHistory,
                 args: argparse.Namespace) -> int:
    """One structured turn, recorded as the desktop records it (desktop/turn_runs.py)."""
    # With history, the context is the conversation's active branch ending at this prompt.
    messages = history.begin(args.prompt, system=args.system, model=backend.name) or _messages(args)

    def on_retry(event: StructuredRetry) -> None:
        record(history.recorder, event)
        _report_retry(event, args.events)

    def on_notice(event: Notice) -> None:
        record(history.recorder, event)
        _report_notice(event, args.events)

    runner = StructuredRunner(backend, on_event=on_retry, on_notice=on_notice)
    try:
        result = runner.run(messages, schema, sampling=sampling, max_tokens=args.max_tokens)
    except ConfigError as exc:  # e.g. a $ref that cannot be resolved offline
        record(history.recorder, TurnError(error_kind(exc), str(exc)))
        return _fail(str(exc))
    except StructuredOutputError as exc:
        record(history.recorder, TurnError("structured_output", exc.last_error))
        return _report_error("structured_output", exc.last_error, args.events,
                             f"no valid JSON after {1 + MAX_STRUCTURED_RETRIES} attempts: {exc.last_error}")
    except LLMError as exc:
        record(history.recorder, TurnError(error_kind(exc), str(exc)))
        return _report_error(error_kind(exc), str(exc), args.events, str(exc))
    except KeyboardInterrupt:
        history.stopped()
        return EXIT_INTERRUPTED
    # The accepted reply is the assistant's message; the turn completes with the run's stats.
    record(history.recorder, ContentDelta(fenced_json(result.value)))  # stored as the app shows it
    record(history.recorder, TurnDone(result.stats))
    _report_value(result, args.events)
    return EXIT_OK


def _messages(args: argparse.Namespace) -> list[Message]:
    messages: list[Message] = [{"role": "system", "content": args.system}] if args.system else []
    messages.append({"role": "user", "content": args.prompt})
    return messages


def _report_retry(event: StructuredRetry, events: bool) -> None:
    if events:
        _emit(event_to_json(event))
    else:
        sys.stderr.write(f"ember: the reply was not valid: {event.error}; asking again "
                         f"(attempt {event.attempt} of {1 + MAX_STRUCTURED_RETRIES})…\n")


def _report_notice(event: Notice, events: bool) -> None:
    if events:
        _emit(event_to_json(event))
    else:
        sys.stderr.write(f"ember: note: {event.text}\n")


def _report_value(result: StructuredResult, events: bool) -> None:
    if events:
        _emit({"type": "json", "value": result.value})
        _emit(event_to_json(TurnDone(result.stats)))
    else:
        sys.stdout.write(json.dumps(result.value, indent=2, ensure_ascii=False) + "\n")


def _report_error(kind: str, message: str, events: bool, line: str) -> int:
    if events:
        _emit(event_to_json(TurnError(kind, message)))
    else:
        sys.stderr.write(f"ember: {line}\n")
    return EXIT_TURN_ERROR


def _emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def _fail(message: str) -> int:
    sys.stderr.write(f"ember: {message}\n")
    return EXIT_USAGE
