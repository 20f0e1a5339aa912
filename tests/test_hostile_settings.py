"""Hand-edited settings files, network lists and server URLs: a wrong type is set aside with a
warning, never a traceback (adversarial review 2: SP-03, NW-19, NW-20).

Each file has its schema (models/library/json_schema.py); these tests write the values the
review wrote, and one of each other wrong type, and check that every reader still starts.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from desktop.core.model_choice import remote_label
from engine.errors import ConfigError
from engine.network.destinations import parse_destination
from engine.network.policy import EgressPolicy, load_settings, settings_file
from models.library.json_input import parse_json_input
from models.library.json_schema import conform, holds, is_url, strict_dumps
from models.library.paths import ember_paths
from models.library.scan import load_library_state
from models.library.settings import ModelSettings, load_model_settings
from models.library.settings import settings_file as model_settings_file

WRONG = [["q8_0"], {"q8_0": 1}, 8, None, True, "q9_9"]


def _write(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")


def _ember(*argv: str) -> int:
    from desktop.cli.main import main

    return main(list(argv))


@pytest.mark.parametrize("value", WRONG)
def test_a_wrong_kv_cache_type_falls_back_to_the_default(
    tmp_path: Path, value: object, caplog: pytest.LogCaptureFixture
) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    _write(model_settings_file(), {"version": 1, "models": {str(model.resolve()): {"kv_cache": value, "top_k": 7}}})
    with caplog.at_level(logging.WARNING):
        settings = load_model_settings(model)
    assert settings.kv_cache == "f16" and settings.top_k == 7
    assert "kv_cache" in caplog.text


@pytest.mark.parametrize("field", ["context_policy", "kv_cache", "temperature", "seed", "draft_model"])
def test_no_model_setting_check_raises_on_an_unhashable_value(field: str) -> None:
    for value in ([1], {"a": 1}):
        assert ModelSettings.from_json({field: value}) == ModelSettings()
        with pytest.raises(ValueError, match="invalid model setting"):
            ModelSettings(**{field: value})  # type: ignore[arg-type]


def test_a_models_map_of_the_wrong_type_is_set_aside(tmp_path: Path) -> None:
    _write(model_settings_file(), {"version": 1, "models": ["not", "a", "map"]})
    assert load_model_settings(tmp_path / "m.gguf") == ModelSettings()


@pytest.mark.parametrize("entry", ["[::1", "http://[fe80::1/v1", "host:99999", "127.0.0.1:x"])
def test_a_bad_allow_entry_is_skipped_and_the_rest_applies(entry: str) -> None:
    paths = ember_paths()
    _write(settings_file(paths), {"allow": [entry, "127.0.0.1:18312", 7, None]})
    view = EgressPolicy(paths).view()
    assert view.permits("127.0.0.1", 18312)
    assert [str(a.destination) for a in view.allowed] == ["127.0.0.1:18312"]


@pytest.mark.parametrize("data", [{"zero_egress": "no", "allow": "x"}, {"zero_egress": [], "allow": {"a": 1}}])
def test_network_settings_of_the_wrong_types_keep_zero_egress_on(data: dict[str, object]) -> None:
    paths = ember_paths()
    _write(settings_file(paths), data)
    settings = load_settings(paths)
    assert settings.zero_egress is True and settings.allow == ()


def test_a_saved_server_with_a_broken_url_is_set_aside() -> None:
    paths = ember_paths()
    _write(
        paths.config_dir / "library.json",
        {
            "remote_servers": [
                {"name": "lan", "base_url": "http://[fe80::1/v1"},
                {"name": "ok", "base_url": "http://127.0.0.1:8080/v1"},
            ]
        },
    )
    servers = load_library_state(paths).remote_servers
    assert [s.name for s in servers] == ["ok"]
    assert [str(a.destination) for a in EgressPolicy(paths).view().allowed] == ["127.0.0.1:8080"]
    assert remote_label(None, servers[0].base_url) == "Remote model at 127.0.0.1:8080"


def test_library_fields_of_the_wrong_types_are_set_aside(caplog: pytest.LogCaptureFixture) -> None:
    paths = ember_paths()
    _write(
        paths.config_dir / "library.json",
        {
            "folders": "x",
            "recent": {"a": 1},
            "last_used": 5,
            "remote_servers": {"name": "lan"},
            "last_used_server": ["s"],
        },
    )
    with caplog.at_level(logging.WARNING):
        state = load_library_state(paths)
    assert (state.folders, state.recent, state.last_used, state.remote_servers) == ((), (), None, ())
    assert "library.json: ignoring 'last_used' (5)" in caplog.text


@pytest.mark.parametrize(
    "argv", [("network", "allow", "[::1"), ("network", "remove", "[::1"), ("network", "allow", "http://[fe80::1/v1")]
)
def test_network_allow_of_a_broken_destination_is_one_line(
    argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    assert _ember(*argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a destination" in err


def test_every_command_that_reads_the_network_list_survives_a_bad_entry(capsys: pytest.CaptureFixture[str]) -> None:
    _write(settings_file(ember_paths()), {"allow": ["[::1", "127.0.0.1:18312"]})
    assert _ember("network") == 0
    assert _ember("doctor", "--network", "--json") == 0
    assert "127.0.0.1:18312" in capsys.readouterr().out


def test_parse_destination_refuses_what_urlsplit_cannot_split() -> None:
    for text in ("[::1", "http://[fe80::1/v1", "[::1]:99999"):
        with pytest.raises(ConfigError, match="not a destination"):
            parse_destination(text)


def test_a_check_that_raises_is_a_failed_check(caplog: pytest.LogCaptureFixture) -> None:
    assert not holds(lambda v: v in {"a": 1}, ["a"])
    with caplog.at_level(logging.WARNING):
        kept = conform({"kv": ["q8_0"], "other": 1}, {"kv": lambda v: v in {"f16": 1}}, "f.json")
    assert kept == {"other": 1}
    assert "f.json" in caplog.text and "'kv'" in caplog.text
    assert not is_url("http://[fe80::1/v1") and is_url("http://[fe80::1]:8080/v1")


def test_numbers_json_has_no_room_for_are_read_as_null_and_never_written() -> None:
    assert parse_json_input('{"a": NaN, "b": Infinity, "c": -Infinity, "d": 1e400, "e": 1.5}') == {
        "a": None,
        "b": None,
        "c": None,
        "d": None,
        "e": 1.5,
    }
    text = strict_dumps({"a": float("nan"), "b": [float("inf")], "c": 1.5})
    assert json.loads(text, parse_constant=lambda c: pytest.fail(c)) == {"a": None, "b": [None], "c": 1.5}


@pytest.mark.slow
def test_the_window_starts_with_every_hand_edited_value_at_once(smollm_path: Path, ember_home: Path) -> None:
    """SP-03 and NW-20 together: the window died with status 1 at every start."""
    paths = ember_paths().ensure()
    _write(model_settings_file(), {"version": 1, "models": {str(smollm_path.resolve()): {"kv_cache": ["q8_0"]}}})
    _write(settings_file(paths), {"allow": ["[::1", "127.0.0.1:18312"]})
    _write(paths.config_dir / "library.json", {"remote_servers": [{"name": "lan", "base_url": "http://[fe80::1/v1"}]})
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "EMBER_HOME": str(ember_home)}
    proc = subprocess.Popen([sys.executable, "-m", "desktop"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    log = ember_home / "logs" / "ember.log"
    try:
        deadline = time.monotonic() + 60
        while "window shown" not in (log.read_text() if log.exists() else ""):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the window never came up"
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0 and b"Traceback" not in err, err
