"""API keys for saved remote servers, kept apart from everything else.

The library (`library.json`) names servers but never holds a key: it is the kind of file
people paste into bug reports. Keys live in `remote_keys.json` in the config directory,
keyed by base URL:

    {"version": 1, "keys": {"http://host:8080/v1": "sk-..."}}

The file is created owner-only (0600) through `os.open`, so it is never readable by
others even for a moment, and is replaced atomically. Nothing here logs a key.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import cast

from models.library.jsonstore import load_json_object, string_keys, write_json_atomic
from models.library.paths import EmberPaths, ember_paths

log = logging.getLogger(__name__)

KEYS_FILENAME = "remote_keys.json"
FORMAT_VERSION = 1


def keys_file(paths: EmberPaths | None = None) -> Path:
    return (paths or ember_paths()).config_dir / KEYS_FILENAME


def key_id(base_url: str) -> str:
    """The key a server is stored under: its base URL without trailing slashes or spaces."""
    return base_url.strip().rstrip("/")


def _stored(paths: EmberPaths | None) -> dict[str, str]:
    data = load_json_object(keys_file(paths), {"version": FORMAT_VERSION, "keys": {}})
    keys = data.get("keys")
    if not isinstance(keys, dict):
        return {}
    items = string_keys(cast(dict[object, object], keys))
    return {url: key for url, key in items.items() if isinstance(key, str) and key}


def load_api_key(base_url: str, *, paths: EmberPaths | None = None) -> str | None:
    """The saved key for `base_url`, or None when there is none."""
    return _stored(paths).get(key_id(base_url))


def save_api_key(base_url: str, api_key: str | None, *, paths: EmberPaths | None = None) -> None:
    """Store `api_key` for `base_url`; an empty or None key forgets the saved one."""
    keys = _stored(paths)
    url = key_id(base_url)
    if api_key:
        keys[url] = api_key
    elif keys.pop(url, None) is None:
        return  # nothing saved, nothing to forget: do not create the file
    # mkstemp creates the temporary file 0600 and os.replace keeps that mode: owner-only from the start.
    path = keys_file(paths)
    write_json_atomic(path, {"version": FORMAT_VERSION, "keys": keys})
    log.info("saved remote server keys to %s", path.name)  # never the keys themselves
