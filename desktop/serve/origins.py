"""Who may talk to `ember serve` from a browser: the `Origin` allow list and the `Host` check.

A web page the user visits can send requests to 127.0.0.1 (a `text/plain` POST needs no
preflight), and with DNS rebinding it can even read the replies, because its requests look
same-origin to the browser. Two checks stop both, as Ollama's do:

- `Origin` (sent by every browser on every cross-origin request and on every POST) must be on
  the allow list: loopback pages on any port, and desktop app shells whose origin no web page
  can take (`app://`, `tauri://`, `vscode-webview://`, `vscode-file://`), plus whatever
  `--allow-origin` and `EMBER_ORIGINS` add. `file://` and `null` are left out: a downloaded
  HTML file or a sandboxed frame of any site carries them.
- `Host` must name this machine's loopback (`localhost`, `*.localhost`, a loopback address) or
  the address the server is bound to: a rebinding page's requests carry its own domain.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass

from engine.api.errors import ConfigError

ORIGINS_ENV = "EMBER_ORIGINS"
ANY = ("*", "null")  # patterns that let any web page in: only behind an API key
DEFAULT_ORIGINS: tuple[str, ...] = (
    *(
        f"{scheme}://{host}:*"
        for scheme in ("http", "https")
        for host in ("localhost", "127.0.0.1", "[::1]", "0.0.0.0", "*.localhost")
    ),
    "app://*",
    "tauri://*",
    "vscode-webview://*",
    "vscode-file://*",
)
_ORIGIN = re.compile(r"([a-z][a-z0-9+.\-]*)://(\[[0-9a-f:.]+\]|[^\s:/?#\[\]@]+)(?::([0-9]{1,5}|\*))?")
_MAX_ORIGIN = 512


@dataclass(frozen=True, slots=True)
class _Pattern:
    scheme: str
    host: str  # "*" any host; "*.example.com" any subdomain
    port: str | None  # None: no port; "*": any port or none

    def matches(self, scheme: str, host: str, port: str | None) -> bool:
        if scheme != self.scheme or not (self.port == "*" or port == self.port):
            return False
        if self.host == "*":
            return True
        if self.host.startswith("*."):
            return host.endswith(self.host[1:]) and len(host) > len(self.host) - 1
        return host == self.host


def _split(origin: str) -> tuple[str, str, str | None] | None:
    """(scheme, host, port) of `scheme://host[:port]`, lower-cased; None when it is not one."""
    text = origin.strip().lower()
    if len(text) > _MAX_ORIGIN:
        return None
    match = _ORIGIN.fullmatch(text[:-1] if text.endswith("/") else text)
    return (match[1], match[2], match[3]) if match else None


@dataclass(frozen=True, slots=True)
class OriginPolicy:
    """The origins allowed to call the server from a browser (`*`: any, behind an API key)."""

    patterns: tuple[_Pattern, ...]
    any_origin: bool = False
    null_origin: bool = False

    @classmethod
    def build(
        cls, extra: Iterable[str] = (), *, api_key: str | None = None, environ: dict[str, str] | None = None
    ) -> OriginPolicy:
        """The defaults, then `EMBER_ORIGINS` (comma-separated), then `extra` (`--allow-origin`).

        ConfigError (one line) for an entry that is not an origin, and for `*` or `null`
        without an API key: either lets every web page the user visits drive the model.
        """
        env = (os.environ if environ is None else environ).get(ORIGINS_ENV, "")
        entries = [*DEFAULT_ORIGINS, *(e for e in env.split(",") if e.strip()), *extra]
        patterns: list[_Pattern] = []
        wide: set[str] = set()
        for entry in entries:
            text = entry.strip().lower()
            if text in ANY:
                wide.add(text)
                continue
            parts = _split(text)
            if parts is None:
                raise ConfigError(
                    f"not an origin: {entry.strip()[:80]!r} (expected scheme://host[:port], "
                    "e.g. http://localhost:3000 or https://*.example.com)"
                )
            patterns.append(_Pattern(*parts))
        if wide and not api_key:
            raise ConfigError(
                f"allowing origin {sorted(wide)[0]!r} lets any web page you visit use the model: "
                "give an API key with --api-key-env VAR, or list the origins you use"
            )
        return cls(tuple(patterns), "*" in wide, "null" in wide)

    @classmethod
    def default(cls) -> OriginPolicy:
        return cls.build(environ={})

    def allows(self, origin: str) -> bool:
        if self.any_origin:
            return True
        if origin.strip().lower() == "null":
            return self.null_origin
        parts = _split(origin)
        return parts is not None and any(p.matches(*parts) for p in self.patterns)


def _host_name(header: str) -> str | None:
    """The name in a `Host` header (`name`, `name:port`, `[v6]:port`), lower-cased; None if malformed."""
    text = header.strip().lower()
    if text.startswith("["):
        end = text.find("]")
        rest = text[end + 1 :]
        if end < 0 or (rest and not (rest.startswith(":") and rest[1:].isascii() and rest[1:].isdigit())):
            return None
        return text[1:end]
    name, _, port = text.partition(":")
    if port and not (port.isascii() and port.isdigit()):
        return None
    return name.rstrip(".") or None


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class HostPolicy:
    """The `Host` names the server answers to, for the address it is bound to."""

    bound: tuple[str, ...]  # the address as given and as bound (IP literals or names)
    names: tuple[str, ...] = ()  # this machine's own names (a wildcard bind)

    @classmethod
    def for_bind(cls, *bound: str) -> HostPolicy:
        addresses = tuple(b.strip("[]").lower() for b in bound if b)
        names = (socket.gethostname().lower(),) if any(_wildcard(a) for a in addresses) else ()
        return cls(addresses, names)

    def allows(self, header: str) -> bool:
        name = _host_name(header)
        if name is None:
            return False
        if name == "localhost" or name.endswith(".localhost") or name in self.bound:
            return True  # browsers resolve *.localhost to loopback themselves: no page can own one
        address = _ip(name)
        if address is not None and address.is_loopback:
            return True
        if not any(_wildcard(b) for b in self.bound):
            return False
        # Bound to every interface (only with an API key): any address of this machine, by number
        # or by its own name. A rebinding page always arrives under a domain it owns.
        return address is not None or name in self.names or name.removesuffix(".local") in self.names


def _wildcard(bound: str) -> bool:
    address = _ip(bound)
    return address is not None and address.is_unspecified
