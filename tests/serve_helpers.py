"""Running `ember serve`'s app on 127.0.0.1 (a free port) in-process, for the serve tests and the bench."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from desktop.serve.admission import ModelLine
from desktop.serve.app import ServeState
from desktop.serve.connections import ConnectionLimits
from desktop.serve.embeddings import TextEmbedder
from desktop.serve.origins import OriginPolicy
from desktop.serve.record import ApiHistory
from desktop.serve.server import ServerThread, bind
from desktop.serve.state import defaults_for, model_id_for
from desktop.serve.wire import Defaults
from engine.backends.base import Backend, Capabilities, Message, PlainBackend, Request, Sampling, StreamInfo
from engine.backends.image_input import ImageData
from engine.cancel import CancelToken
from engine.events import Piece
from engine.runtime import Engine
from engine.session.settings import TurnSettings


@dataclass
class Served:
    server: ServerThread
    engine: Engine

    @property
    def url(self) -> str:
        return self.server.address

    @property
    def state(self) -> ServeState:
        return self.server.state

    def close(self) -> None:
        self.server.stop()
        self.engine.close_sync()


def serve(
    backend: Backend,
    *,
    api_key: str | None = None,
    max_waiting: int = 32,
    max_tokens: int = 256,
    context_size: int = 0,
    history: ApiHistory | None = None,
    embedder: TextEmbedder | None = None,
    origins: OriginPolicy | None = None,
    limits: ConnectionLimits | None = None,
    settings: TurnSettings | None = None,
    model_defaults: bool = False,
) -> Served:
    """`settings`: the defaults are what `ember serve` gives with these model settings
    (`state.defaults_for`); without, every request defaults to greedy and `max_tokens`."""
    engine = Engine(backend)
    defaults = (
        defaults_for(engine, settings, model_defaults=model_defaults)
        if settings is not None
        else lambda: Defaults(Sampling.greedy(), max_tokens, context_size)
    )
    state = ServeState(
        engine,
        model_id=model_id_for(engine),
        defaults=defaults,
        api_key=api_key,
        line=ModelLine(max_waiting),
        history=history,
        embedder=embedder,
        origins=origins or OriginPolicy.default(),
    )
    server = ServerThread(state, bind("127.0.0.1", 0), limits)
    server.start()
    return Served(server, engine)


def last_user_text(messages: Sequence[Message]) -> str:
    return next((str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "user"), "")


class EchoBackend(PlainBackend):
    """Answers "echo: <the last user message>" word by word, so every reply names its own request.

    `delay_s` per piece makes replies take time (queueing, disconnects); `pieces` counts every
    piece streamed and `cancelled` the streams that ended on a cancel.
    """

    capabilities = Capabilities(device="Scripted")

    def __init__(self, delay_s: float = 0.0, repeat: int = 1, gate: threading.Event | None = None) -> None:
        self.name = "echo"
        self.gate = gate  # when given, every reply waits until it is set (a model held as long as a test needs)
        self.delay_s = delay_s
        self.repeat = repeat
        self.pieces = 0
        self.cancelled = 0
        self.lock = threading.Lock()

    def stream(self, request: Request, cancel: CancelToken, info: StreamInfo) -> Iterator[Piece]:
        words = ("echo: " + last_user_text(request.messages)).split(" ") * self.repeat
        info.prompt_tokens = sum(len(str(m.get("content") or "").split()) for m in request.messages)
        while self.gate is not None and not self.gate.wait(0.01) and not cancel.cancelled:
            pass
        for i, word in enumerate(words):
            if self.delay_s:
                time.sleep(self.delay_s)
            if cancel.cancelled:  # checked before every piece, as the real backends do
                with self.lock:
                    self.cancelled += 1
                info.finish_reason = "cancelled"
                return
            if i >= request.max_tokens:
                info.finish_reason = "length"
                return
            with self.lock:
                self.pieces += 1
            yield Piece(word if i == 0 else " " + word)
        info.finish_reason = "stop"

    def close(self) -> None:
        pass


class SeeingEcho(EchoBackend):
    """The echo, able to see: it accepts images and keeps the ones each request carried."""

    capabilities = Capabilities(device="Scripted", vision=True)

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[list[ImageData]] = []

    def stream(self, request: Request, cancel: CancelToken, info: StreamInfo) -> Iterator[Piece]:
        self.seen.append([i for m in request.messages for i in m.get("images") or ()])
        return super().stream(request, cancel, info)
