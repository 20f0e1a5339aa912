"""One error tree, a TurnError kind for each failure, and backends that declare what they can do."""

from __future__ import annotations

import inspect
import sqlite3
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import engine.errors
import engine.history.types
from desktop.core.model_choice import describe_backend
from desktop.serve.embeddings import embed_all
from engine.backends.base import Capabilities, make_request
from engine.backends.openai import OpenAIBackend
from engine.backends.scripted import ScriptedBackend
from engine.cancel import CancelToken
from engine.docs.embed import embed_in_groups
from engine.errors import BackendError, Cancelled, ContextOverflowError, EngineError, LLMError
from engine.events import TurnError, TurnErrorKind
from engine.history.schema import SchemaTooNewError
from engine.history.store import HistoryStore
from engine.hub.errors import DownloadCancelled, DownloadError
from engine.turns.runner import TurnRunner
from models.errors import EmberError, GGUFError
from models.library.default_model import DefaultModelMissing


def _error_classes() -> list[type[BaseException]]:
    modules = (engine.errors, engine.history.types)
    return [c for m in modules for _, c in inspect.getmembers(m, inspect.isclass) if issubclass(c, BaseException)]


def test_every_error_descends_from_one_base() -> None:
    classes = [*_error_classes(), GGUFError, DefaultModelMissing, SchemaTooNewError]
    assert len(classes) > 10
    assert all(issubclass(c, EmberError) for c in classes)


def test_every_stop_on_a_cancel_check_is_the_one_cancelled() -> None:
    """Downloads, the indexer's embedding and the server's embedding raised four classes (#47)."""
    assert issubclass(DownloadCancelled, Cancelled) and issubclass(DownloadCancelled, DownloadError)
    assert not issubclass(Cancelled, EngineError)  # not a failure: a failure handler does not take it
    embedder: Any = SimpleNamespace(max_tokens=8, count_tokens=lambda _text: 1)
    stop = CancelToken()
    stop.cancel()
    with pytest.raises(Cancelled):
        embed_all(embedder, ["a", "b"], stop)
    with pytest.raises(Cancelled):
        embed_in_groups(embedder, ["a", "b"], stop)


class _Raising(ScriptedBackend):
    def __init__(self, error: LLMError) -> None:
        super().__init__([])
        self.error = error

    def stream(self, *args: object, **kwargs: object):  # type: ignore[override]
        raise self.error


def _kind(backend: ScriptedBackend, schema: object = None) -> TurnErrorKind:
    events = list(TurnRunner(backend).run(make_request([{"role": "user", "content": "hi"}], schema=schema)))
    end = events[-1]
    assert isinstance(end, TurnError)
    return end.kind


def test_the_kinds_are_exactly_those_produced() -> None:
    city = {"type": "object", "required": ["city"]}
    produced = {
        _kind(ScriptedBackend.from_texts("", "")),  # malformed_reply
        _kind(_Raising(ContextOverflowError("too long"))),  # context_full
        _kind(ScriptedBackend.from_texts("a", "b", "c"), city),  # structured_output
        _kind(ScriptedBackend.from_texts()),  # script
        _kind(ScriptedBackend.from_texts("x"), {"type": 5}),  # config
        _kind(_Raising(BackendError("boom"))),  # backend
        TurnErrorKind.NO_MODEL,  # reported by the front end before a turn starts (test_gui_controller)
    }
    assert produced == set(TurnErrorKind)


def test_sqlite_errors_are_translated_at_the_store_boundary(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "h.db")
    store.close()
    with pytest.raises(engine.history.types.HistoryError, match="history database error") as info:
        store.conversations()  # a closed connection: sqlite3.ProgrammingError inside
    assert isinstance(info.value.__cause__, sqlite3.Error)


def test_backends_declare_their_capabilities() -> None:
    scripted = ScriptedBackend.from_texts("x")
    remote = OpenAIBackend("http://127.0.0.1:9", supports_grammar=True)
    assert scripted.capabilities == Capabilities(device="Scripted", vision=True)  # takes images for the window tests
    assert (remote.capabilities.grammar, remote.capabilities.device) == (True, "Remote")
    assert describe_backend(remote, "R").device == "Remote" and describe_backend(scripted).device == "Scripted"
