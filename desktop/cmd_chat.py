"""`ember chat`: one turn from the command line, streamed to stdout (or as JSON events)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from desktop.cmd_history import ChatHistory, add_chat_options
from engine.backend import Backend, CancelToken, Message, Sampling, make_request
from engine.errors import ConfigError, EngineError, ModelLoadError
from engine.events import ContentDelta, Event, Recovery, ThinkingDelta, TurnDone, TurnError, event_to_json
from engine.factory import make_backend, parse_backend_spec
from engine.turn import TurnRunner

EXIT_OK, EXIT_USAGE, EXIT_TURN_ERROR = 0, 2, 3


def register(sub: Any) -> None:
    p = sub.add_parser("chat", help="send one message and stream the reply")
    p.add_argument("prompt", metavar="PROMPT", help="the message to send")
    p.add_argument("--model", default="default", help="GGUF path or 'default' (with openai: the model name)")
    p.add_argument("--backend", default="llama", help="llama (default), script:FILE or openai:URL")
    p.add_argument("--system", default=None, help="system prompt")
    p.add_argument("--temperature", type=float, default=None, help="sampling temperature (0 = greedy)")
    p.add_argument("--seed", type=int, default=None, help="sampling seed (default: random)")
    p.add_argument("--max-tokens", type=_positive_int, default=512, help="reply length limit")
    p.add_argument("--ctx", type=_positive_int, default=4096, help="context length in tokens")
    p.add_argument("--events", action="store_true", help="print one JSON object per event")
    p.add_argument("--show-thinking", action="store_true", help="print thinking to stderr")
    p.add_argument("--api-key-env", metavar="VAR", help="with openai: read the API key from this variable")
    p.add_argument("--schema", metavar="FILE", default=None, help="reply with JSON matching this JSON Schema file")
    add_chat_options(p)
    p.set_defaults(func=run)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return value


def _fail(message: str) -> int:
    sys.stderr.write(f"ember: {message}\n")
    return EXIT_USAGE


def open_backend(args: argparse.Namespace) -> Backend:
    """The backend the arguments ask for; raises EngineError with a readable message."""
    import os

    spec = parse_backend_spec(args.backend)
    if spec.kind == "openai":
        key = os.environ.get(args.api_key_env) if args.api_key_env else None
        if args.api_key_env and key is None:
            raise ConfigError(f"the environment variable {args.api_key_env} is not set")
        name = None if args.model == "default" else args.model
        return make_backend(spec, model_name=name, api_key=key)
    path = None if args.model in (None, "default") else Path(args.model).expanduser()
    return make_backend(spec, model_path=path, n_ctx=args.ctx)


def sampling_from(args: argparse.Namespace) -> Sampling:
    base = Sampling()
    temperature = base.temperature if args.temperature is None else args.temperature
    if temperature < 0:
        raise ConfigError("--temperature must be 0 or more")
    return Sampling(temperature=temperature, top_p=base.top_p, top_k=base.top_k, min_p=base.min_p,
                    repeat_penalty=base.repeat_penalty, seed=args.seed)


def run(args: argparse.Namespace) -> int:
    if args.schema is not None:  # structured replies: desktop/cmd_structured.py
        from desktop.cmd_structured import run_schema_chat

        return run_schema_chat(args)
    try:
        sampling = sampling_from(args)
        history = ChatHistory.open(args)  # checked before a model loads: a bad id fails fast
    except ConfigError as exc:
        return _fail(str(exc))
    with history:
        return _chat(args, sampling, history)


def _chat(args: argparse.Namespace, sampling: Sampling, history: ChatHistory) -> int:
    try:
        backend = open_backend(args)
    except (ModelLoadError, ConfigError) as exc:
        return _fail(str(exc))
    except EngineError as exc:
        return _fail(str(exc))
    # With history, the context is the conversation's active branch ending at this prompt.
    messages = history.begin(args.prompt, system=args.system, model=backend.name) or _single_turn(args)
    request = make_request(messages, sampling=sampling, max_tokens=args.max_tokens)
    cancel = CancelToken()
    try:
        return _print_turn(history.wrap(TurnRunner(backend).run(request, cancel)), args)
    except KeyboardInterrupt:
        cancel.cancel()
        history.stopped()
        sys.stdout.write("\n")
        return 130
    finally:
        backend.close()


def _single_turn(args: argparse.Namespace) -> list[Message]:
    messages: list[Message] = [{"role": "system", "content": args.system}] if args.system else []
    messages.append({"role": "user", "content": args.prompt})
    return messages


def _print_turn(events: Any, args: argparse.Namespace) -> int:
    status = EXIT_OK
    for event in events:
        if args.events:
            _emit_json(event, sys.stdout)
        else:
            _emit_text(event, args.show_thinking)
        if isinstance(event, TurnError):
            status = EXIT_TURN_ERROR
    return status


def _emit_json(event: Event, out: TextIO) -> None:
    out.write(json.dumps(event_to_json(event), ensure_ascii=False) + "\n")
    out.flush()


def _emit_text(event: Event, show_thinking: bool) -> None:
    match event:
        case ContentDelta(text=text):
            sys.stdout.write(text)
            sys.stdout.flush()
        case ThinkingDelta(text=text) if show_thinking:
            sys.stderr.write(text)
        case Recovery():
            sys.stderr.write("ember: the reply was empty; asking once more…\n")
        case TurnDone():
            sys.stdout.write("\n")
        case TurnError(message=message):
            sys.stdout.write("\n")
            sys.stderr.write(f"ember: {message}\n")
        case _:
            pass
