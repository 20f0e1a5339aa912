"""`ember serve`: the model as a local OpenAI-compatible API until Ctrl+C.

    ember serve [--host 127.0.0.1] [--port 8080] [--model PATH|default] [--api-key-env VAR]
                [--embedder GGUF|default] [--allow-origin ORIGIN ...]

Loopback by default; any other address needs an API key (`--api-key-env VAR` names the
variable holding it), else one line and exit 2. The address is checked and bound before
the model loads, so a port in use fails at once. `--embedder` loads an embedding model
beside the chat model for `/v1/embeddings` (without it that endpoint answers 501). The
server itself is `desktop/serve/`. Browser pages may call only from loopback origins and the
ones `--allow-origin` / `EMBER_ORIGINS` add (`*` only with an API key): `desktop/serve/origins.py`.

SIGTERM and SIGINT stop it within 2 s whatever a request is doing: replies in progress get one
second to end, a model thread that does not let go is left behind (the process exits without
it), and a watchdog kills the process if even the stop cannot run (`desktop/cli/hard_stop.py`).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Any

from desktop.cli.arg_checks import ctx_arg, threads_arg
from desktop.cli.cmd_history import open_store
from desktop.cli.common import EXIT_OK, fail, note_base_model, open_backend, positive_int, run_settings, warn
from desktop.cli.hard_stop import StopRequest, stop_on_signals
from desktop.serve import DEFAULT_HOST, DEFAULT_PORT
from desktop.serve.admission import DEFAULT_MAX_WAITING, ModelLine
from desktop.serve.app import ServeState
from desktop.serve.embeddings import LlamaTextEmbedder, TextEmbedder
from desktop.serve.embeddings import model_id as embedding_model_id
from desktop.serve.origins import ORIGINS_ENV, OriginPolicy
from desktop.serve.record import ApiHistory
from desktop.serve.server import address, bind, check_exposure, serve
from desktop.serve.state import defaults_for, model_id_for
from engine.api.documents import DEFAULT_EMBEDDER, resolve_embedder
from engine.api.errors import ConfigError, EngineError, ModelLoadError
from engine.api.session import Engine


def register(sub: Any) -> None:
    p = sub.add_parser("serve", help="serve the model as a local OpenAI-compatible API")
    p.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"address to listen on (default {DEFAULT_HOST}; anything but loopback needs --api-key-env)",
    )
    p.add_argument("--port", type=_port, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0 = any free)")
    p.add_argument("--model", default="default", help="GGUF path or 'default' (the built-in model)")
    p.add_argument("--backend", default="llama", help="llama (default) or script:FILE (a scripted demo)")
    p.add_argument(
        "--embedder",
        metavar="GGUF",
        default=None,
        help="embedding model for /v1/embeddings ('default': all-MiniLM-L6-v2, Ember's default embedder); 501 without",
    )
    p.add_argument("--api-key-env", metavar="VAR", help="require the API key held by this environment variable")
    p.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="let browser pages from ORIGIN call (repeatable; e.g. https://chat.example.com, "
        f"http://*.example.com:*; '*' needs an API key); also {ORIGINS_ENV}=A,B. "
        "Loopback pages are always allowed",
    )
    p.add_argument(
        "--queue",
        type=positive_int,
        default=DEFAULT_MAX_WAITING,
        metavar="N",
        help=f"requests that may wait for the model (default {DEFAULT_MAX_WAITING}); more get 429",
    )
    p.add_argument(
        "--model-defaults",
        action="store_true",
        help="fields a request leaves out take the model's recommended settings "
        "(default: OpenAI's: temperature 1, top_p 1, no repeat penalty)",
    )
    p.add_argument("--record", action="store_true", help="record API requests in the history (default: not)")
    p.add_argument("--ctx", type=ctx_arg, default=None, help="context length in tokens (default: the model's setting)")
    p.add_argument("--gpu-layers", type=int, default=None, help="layers to offload to the GPU (-1 = all)")
    p.add_argument("--threads", type=threads_arg, default=None, help="CPU threads")
    p.set_defaults(func=run, temperature=None, seed=None, max_tokens=None, system=None)


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535, got {text!r}")
    return value


def run(args: argparse.Namespace) -> int:
    if args.backend.startswith("openai:"):
        return fail("ember serve serves a local model: use --model PATH (or script:FILE)")
    try:
        key = _api_key(args.api_key_env)
        check_exposure(args.host, key)
        origins = OriginPolicy.build(args.allow_origin, api_key=key)
        settings = run_settings(args)
        sock = bind(args.host, args.port)
    except EngineError as exc:
        return fail(str(exc))
    embedder: TextEmbedder | None = None
    try:
        embedder = _embedder(args.embedder, args.threads)
        backend = open_backend(argparse.Namespace(**{**vars(args), "api_key_env": None}), settings)
    except EngineError as exc:
        sock.close()
        if embedder is not None:
            embedder.close()
        return fail(str(exc))
    note_base_model(backend)
    engine = Engine(backend)
    defaults = defaults_for(engine, settings, model_defaults=args.model_defaults)
    state = ServeState(
        engine,
        model_id=model_id_for(engine),
        defaults=defaults,
        api_key=key,
        line=ModelLine(args.queue),
        history=ApiHistory(open_store) if args.record else None,
        embedder=embedder,
        origins=origins,
    )
    also = f" (embeddings: {embedding_model_id(embedder)})" if embedder is not None else ""
    sys.stdout.write(f"Serving {backend.name}{also} on {address(sock)} (Ctrl+C stops)\n")
    sys.stdout.flush()
    stop = StopRequest()
    with stop_on_signals(stop, _KILL_S):  # the watchdog stays armed until the models are closed too
        try:
            asyncio.run(_serve(state, sock, args.host, stop))
        finally:
            _close_within(engine, embedder, _CLOSE_S)
    return EXIT_OK


def _embedder(spec: str | None, threads: int | None) -> TextEmbedder | None:
    """The embedding model `--embedder` names (a GGUF path, or 'default': all-MiniLM-L6-v2)."""
    if not spec:
        return None
    if spec == "default":
        try:
            path = resolve_embedder(DEFAULT_EMBEDDER)
        except ModelLoadError as exc:
            raise ConfigError(str(exc)) from None
    else:
        path = Path(spec).expanduser()
        if not path.is_file():
            raise ConfigError(f"embedding model not found: {spec}")
    return LlamaTextEmbedder.load(path, n_threads=threads)


def _api_key(variable: str | None) -> str | None:
    if not variable:
        return None
    key = os.environ.get(variable, "").strip()
    if not key:
        raise ConfigError(f"the environment variable {variable} is not set (it should hold the API key)")
    return key


_GRACE_S = 1  # replies in progress get this long to end once a stop signal came
_CLOSE_S = 0.3  # then the model gets this long to close
_KILL_S = 1.6  # the watchdog's deadline, for a process so stuck that none of the above can run


async def _serve(state: ServeState, sock: Any, host: str, stop: StopRequest) -> None:
    await serve(state, sock, stop=stop.event_here(), host=host, grace_s=_GRACE_S)
    warn(f"stopped after {state.requests} request{'' if state.requests == 1 else 's'}")


def _close_within(engine: Engine, embedder: TextEmbedder | None, seconds: float) -> None:
    """Close the models; when a turn's thread does not let go in time, exit without waiting for it.

    The engine's worker may be inside a step no cancel reaches (a long C call); interpreter
    exit would join it, so the process ends with `os._exit` once everything Ember wrote is
    flushed (the history closed with the server; logs and streams here).
    """

    def close() -> None:
        engine.close_sync()
        if embedder is not None:
            embedder.close()

    closer = threading.Thread(target=close, name="ember-serve-close", daemon=True)
    closer.start()
    closer.join(seconds)
    if closer.is_alive():
        warn("a request was still running in the model; stopped without waiting for it")
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_OK)
