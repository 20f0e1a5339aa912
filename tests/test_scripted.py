"""ScriptedBackend replays exactly, records requests, and fails clearly."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from engine.backends.base import StreamInfo, make_request
from engine.backends.scripted import ScriptedBackend
from engine.cancel import CancelToken
from engine.errors import ConfigError, ScriptExhaustedError
from engine.events import Piece, PromptProgress


def _stream(backend: ScriptedBackend, text: str = "hi", cancel: CancelToken | None = None) -> list[Piece]:
    request = make_request([{"role": "user", "content": text}])
    return _pieces(backend.stream(request, cancel or CancelToken(), StreamInfo()))


def _pieces(stream: Iterable[Piece | PromptProgress]) -> list[Piece]:
    """The pieces of a stream; a script's progress steps are checked where they are tested."""
    return [p for p in stream if isinstance(p, Piece)]


def _pieces_as_they_come(stream: Iterable[Piece | PromptProgress]) -> Iterator[Piece]:
    return (p for p in stream if isinstance(p, Piece))


def test_replays_chunks_exactly(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"replies": [["Hel", "lo", {"text": "<|x|>", "special": True}], ["two"]]}))
    backend = ScriptedBackend.from_file(script)
    assert _stream(backend) == [Piece("Hel"), Piece("lo"), Piece("<|x|>", None, True)]
    assert _stream(backend) == [Piece("two")]


def test_records_requests() -> None:
    backend = ScriptedBackend.from_texts("a")
    _stream(backend, "question")
    assert backend.requests[0].messages == ({"role": "user", "content": "question"},)
    assert backend.requests[0].tools is None


def test_running_out_names_the_script(tmp_path: Path) -> None:
    script = tmp_path / "short.json"
    script.write_text(json.dumps({"replies": [["only"]]}))
    backend = ScriptedBackend.from_file(script)
    _stream(backend)
    with pytest.raises(ScriptExhaustedError, match=r"short\.json"):
        _stream(backend)


def test_a_script_may_name_a_context_size(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"replies": [["ok"]], "n_ctx": 8192}))
    assert ScriptedBackend.from_file(script).n_ctx == 8192


@pytest.mark.parametrize(
    "content",
    ["{", '{"replies": 3}', '{"replies": [[7]]}', '{"replies": ["x"]}', '{"replies": [], "n_ctx": "big"}'],
)
def test_bad_scripts_are_config_errors(tmp_path: Path, content: str) -> None:
    script = tmp_path / "bad.json"
    script.write_text(content)
    with pytest.raises(ConfigError, match=r"bad\.json"):
        ScriptedBackend.from_file(script)


def test_missing_script_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read script"):
        ScriptedBackend.from_file(tmp_path / "nope.json")


def test_cancel_between_delayed_chunks() -> None:
    backend = ScriptedBackend([[{"text": f"t{i}", "delay_ms": 20} for i in range(100)]])
    cancel = CancelToken()
    info = StreamInfo()
    got: list[Piece] = []
    request = make_request([{"role": "user", "content": "x"}])
    for piece in _pieces_as_they_come(backend.stream(request, cancel, info)):
        got.append(piece)
        if len(got) == 3:
            threading.Timer(0.01, cancel.cancel).start()
    assert 3 <= len(got) <= 4
    assert info.finish_reason == "cancelled"


def test_max_tokens_limits_the_reply() -> None:
    backend = ScriptedBackend.from_texts(["a", "b", "c", "d"])
    request = make_request([{"role": "user", "content": "x"}], max_tokens=2)
    info = StreamInfo()
    assert [p.text for p in _pieces(backend.stream(request, CancelToken(), info))] == ["a", "b"]
    assert info.finish_reason == "length"
