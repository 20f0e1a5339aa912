"""API keys for remote servers: a separate owner-only file, never next to the library."""

from __future__ import annotations

import os
import stat

import pytest

from models.library.remote_keys import keys_file, load_api_key, save_api_key


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
def test_keys_round_trip_in_an_owner_only_file() -> None:
    save_api_key("http://gpu-box:8080/v1", "sk-secret-1")
    assert load_api_key("http://gpu-box:8080/v1") == "sk-secret-1"
    assert stat.S_IMODE(keys_file().stat().st_mode) == 0o600


def test_forgetting_a_key_removes_it() -> None:
    save_api_key("http://a/v1", "k1")
    save_api_key("http://a/v1", None)
    assert load_api_key("http://a/v1") is None


def test_forgetting_nothing_writes_nothing() -> None:
    save_api_key("http://b/v1", None)
    assert not keys_file().exists()
