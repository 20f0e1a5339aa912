"""`ember chat`: one turn from the command line, streamed to stdout (or as JSON events)."""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any, TextIO

from desktop.cmd_history import ChatHistory, add_chat_options
from desktop.core.context_choice import policy_for, preview_messages, refusal, with_policy
from engine.backend import Backend, CancelToken, Message, Sampling, make_request
from engine.errors import ConfigError, EngineError, ModelLoadError
from engine.events import ContentDelta, Event, Recovery, ThinkingDelta, TurnDone, TurnError, event_to_json
from engine.factory import make_backend, parse_backend_spec
from engine.history_types import HistoryError
from engine.turn import TurnRunner
from engine.turns.context_policy import ContextPolicy
from engine.turns.context_window import fit_for
from models.default_model import DefaultModelMissing, default_model_path
from models.settings import ModelSettings, load_model_settings

EXIT_OK, EXIT_USAGE, EXIT_TURN_ERROR = 0, 2, 3


def register(sub: Any) -> None:
    p = sub.add_parser("chat", help="send one message and stream the reply")
    p.add_argument("prompt", metavar="PROMPT", help="the message to send")
    p.add_argument("--model", default="default", help="GGUF path or 'default' (with openai: the model name)")
    p.add_argument("--backend", default="llama", help="llama (default), script:FILE or openai:URL")
    p.add_argument("--system", default=None, help="system prompt")
    p.add_argument("--temperature", type=float, default=None, help="sampling temperature (0 = greedy)")
    p.add_argument("--seed", type=int, default=None, help="sampling seed (default: random)")
    p.add_argument("--max-tokens", type=_positive_int, default=None, help="reply length limit (default 512)")
    p.add_argument("--ctx", type=_positive_int, default=None, help="context length in tokens (default 4096)")
    p.add_argument("--gpu-layers", type=int, default=None, help="layers to offload to the GPU (-1 = all)")
    p.add_argument("--threads", type=_positive_int, default=None, help="CPU threads")
    p.add_argument("--events", action="store_true", help="print one JSON object per event")
    p.add_argument("--show-thinking", action="store_true", help="print thinking to stderr")
    p.add_argument("--api-key-env", metavar="VAR", help="with openai: read the API key from this variable")
    p.add_argument("--schema", metavar="FILE", default=None, help="reply with JSON matching this JSON Schema file")
    p.add_argument("--context-policy", choices=[c.value for c in ContextPolicy], default=None,
                   help="when the conversation outgrows the context: truncate-middle (keep the start and the "
                        "latest turns), rolling (latest only) or stop (default: the conversation's, else the model's)")
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
    return make_backend(spec, model_path=_model_path(args), n_ctx=args.ctx, n_gpu_layers=args.gpu_layers,
                        n_threads=args.threads)


def _model_path(args: argparse.Namespace) -> Path:
    if args.model not in (None, "default"):
        return Path(args.model).expanduser()
    try:
        return default_model_path()
    except DefaultModelMissing as exc:
        raise ModelLoadError(str(exc)) from exc


def _saved_settings(args: argparse.Namespace) -> ModelSettings:
    """The model's saved settings (as the GUI keeps them); defaults for remote and scripted backends."""
    if parse_backend_spec(args.backend).kind != "llama":
        return ModelSettings()
    try:
        return load_model_settings(_model_path(args).resolve())
    except (OSError, ValueError, ModelLoadError):
        return ModelSettings()


def sampling_from(args: argparse.Namespace) -> Sampling:
    """Sampling for this run: command-line flags over the model's saved settings.

    Also fills the unset length, context, GPU, thread and system-prompt arguments in `args`
    from those settings, so every later step sees one resolved set.
    """
    saved = _saved_settings(args)
    args.ctx = args.ctx or saved.context_length
    args.max_tokens = args.max_tokens or saved.max_tokens or 512
    args.gpu_layers = saved.gpu_layers if args.gpu_layers is None else args.gpu_layers
    args.threads = args.threads or saved.threads
    args.system = saved.system_prompt or None if args.system is None else args.system
    temperature = saved.temperature if args.temperature is None else args.temperature
    if temperature < 0:
        raise ConfigError("--temperature must be 0 or more")
    return Sampling(temperature=temperature, top_p=saved.top_p, top_k=saved.top_k, min_p=saved.min_p,
                    repeat_penalty=saved.repeat_penalty, seed=saved.seed if args.seed is None else args.seed)


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
    policy = _context_policy(args, history)
    # Checked before anything is stored: a message that cannot be sent never enters the history.
    problem = refusal(backend, preview_messages(history.store, history.conversation_id, args.prompt, args.system),
                      policy, args.max_tokens)
    if problem:
        backend.close()
        sys.stderr.write(f"ember: {problem}\n")
        return EXIT_TURN_ERROR
    # With history, the context is the conversation's active branch ending at this prompt.
    messages = history.begin(args.prompt, system=args.system, model=backend.name,
                             join_roles=False) or _single_turn(args)
    _keep_policy(args, history, policy)
    fit = fit_for(backend, messages, policy, args.max_tokens)
    if fit.cut:
        sys.stderr.write(f"ember: {len(fit.dropped)} earlier messages are outside the model's context ({policy})\n")
    request = make_request(fit.messages, sampling=sampling, max_tokens=args.max_tokens)
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


def _context_policy(args: argparse.Namespace, history: ChatHistory) -> ContextPolicy:
    settings = None
    if history.store is not None and history.conversation_id is not None:
        try:
            settings = history.store.conversation(history.conversation_id).settings
        except (HistoryError, sqlite3.Error):  # recording reports it; the model default applies
            settings = None
    return policy_for(settings, _saved_settings(args), args.context_policy)


def _keep_policy(args: argparse.Namespace, history: ChatHistory, policy: ContextPolicy) -> None:
    """`--context-policy` given: remember it as the conversation's own."""
    if not args.context_policy or history.store is None or history.conversation_id is None:
        return
    try:
        settings = history.store.conversation(history.conversation_id).settings
        history.store.update_conversation(history.conversation_id, settings=with_policy(settings, policy))
    except (HistoryError, sqlite3.Error) as exc:
        sys.stderr.write(f"ember: could not save the context policy: {exc}\n")


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
