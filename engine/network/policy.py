"""The zero-egress setting and what it allows, from `network.json` and the saved servers.

    {"zero_egress": true, "allow": ["localhost:8080", "mcp:fetch"]}

No file (a fresh install) means zero-egress on with nothing allowed. The allowed destinations
are the file's `allow` list plus every remote server saved in the library (saving a server in
the window is how a user allows it); `mcp:NAME` lets MCP server NAME start with network access.
`EgressPolicy` re-reads both files when they change, so `ember network allow` or a server saved
in the window applies to a running app at its next connection.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from engine.errors import ConfigError
from engine.network.destinations import MCP_PREFIX, Destination, parse_destination
from models.library.json_schema import Schema, is_bool, is_list, is_text
from models.library.jsonstore import load_json_object, write_json_atomic
from models.library.paths import EmberPaths

log = logging.getLogger("engine.network")

NETWORK_FILE = "network.json"


@dataclass(frozen=True, slots=True)
class NetworkSettings:
    zero_egress: bool = True
    allow: tuple[str, ...] = ()  # as the user wrote them: destinations and mcp:NAME entries

    def to_json(self) -> dict[str, object]:
        return {"zero_egress": self.zero_egress, "allow": list(self.allow)}


@dataclass(frozen=True, slots=True)
class Allowed:
    """One allowed destination and why (`network.json`, or the saved server's name)."""

    destination: Destination
    source: str


@dataclass(frozen=True, slots=True)
class PolicyView:
    """The policy at one moment: what the guard, the doctor and the status bar read."""

    zero_egress: bool
    allowed: tuple[Allowed, ...] = ()
    mcp_network: frozenset[str] = field(default_factory=frozenset[str])

    def permits(self, host: str, port: int | None) -> bool:
        return not self.zero_egress or any(a.destination.matches(host, port) for a in self.allowed)

    def names_allowed(self, host: str) -> bool:
        """Whether a lookup of `host` (for any port) serves an allowed destination."""
        return not self.zero_egress or any(a.destination.host == host.lower().rstrip(".") for a in self.allowed)


def settings_file(paths: EmberPaths) -> Path:
    return paths.config_dir / NETWORK_FILE


# `allow` keeps its good entries when others are bad: a list of anything is checked item by item.
_SCHEMA: Schema = {"zero_egress": is_bool, "allow": is_list}


def load_settings(paths: EmberPaths) -> NetworkSettings:
    data = load_json_object(settings_file(paths), NetworkSettings().to_json(), _SCHEMA)
    allow = [a for a in cast(list[Any], data["allow"]) if is_text(a)]
    return NetworkSettings(zero_egress=data["zero_egress"] is not False, allow=tuple(allow))


def save_settings(paths: EmberPaths, settings: NetworkSettings) -> None:
    write_json_atomic(settings_file(paths), settings.to_json())


def check_entry(text: str) -> str:
    """An `allow` entry in its stored spelling; ConfigError (one line) if it is neither form."""
    text = text.strip()
    if text.startswith(MCP_PREFIX):
        if not text[len(MCP_PREFIX) :].strip():
            raise ConfigError(f"{text!r}: name the MCP server, e.g. mcp:fetch")
        return text
    return str(parse_destination(text))


def view_of(settings: NetworkSettings, paths: EmberPaths) -> PolicyView:
    allowed: list[Allowed] = []
    mcp: set[str] = set()
    for entry in settings.allow:
        if entry.startswith(MCP_PREFIX):
            mcp.add(entry[len(MCP_PREFIX) :])
            continue
        try:
            allowed.append(Allowed(parse_destination(entry), NETWORK_FILE))
        except ConfigError as exc:  # `ember network allow` checks entries; a hand-edited bad one is skipped
            log.warning("%s: ignoring the allow entry: %s", NETWORK_FILE, exc)
            continue
    from models.library.scan import load_library_state  # only when a connection is checked

    for server in load_library_state(paths).remote_servers:
        try:
            allowed.append(Allowed(parse_destination(server.base_url), f"saved server {server.name!r}"))
        except ConfigError:
            continue
    return PolicyView(settings.zero_egress, tuple(allowed), frozenset(mcp))


class EgressPolicy:
    """The live policy of one process: re-read when `network.json` or the library changes.

    `forced` (tests, the smoke script) fixes the view instead of reading files.
    """

    def __init__(self, paths: EmberPaths, *, forced: PolicyView | None = None) -> None:
        self.paths = paths
        self._forced = forced
        self._lock = threading.Lock()
        self._stamp: tuple[float, float] | None = None
        self._view = forced or PolicyView(True)

    @classmethod
    def fixed(cls, view: PolicyView, paths: EmberPaths) -> EgressPolicy:
        return cls(paths, forced=view)

    def view(self) -> PolicyView:
        if self._forced is not None:
            return self._forced
        from models.library.scan import library_file

        stamp = (_mtime(settings_file(self.paths)), _mtime(library_file(self.paths)))
        with self._lock:
            if stamp != self._stamp:
                self._view = view_of(load_settings(self.paths), self.paths)
                self._stamp = stamp
            return self._view


def _mtime(path: Path) -> float:
    try:
        return os.stat(path).st_mtime_ns / 1e9
    except OSError:
        return 0.0
