"""A network destination as the user writes it: `host`, `host:port`, `[v6]:port` or a URL."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

from engine.errors import ConfigError

_DEFAULT_PORTS = {"http": 80, "https": 443}
MCP_PREFIX = "mcp:"  # `mcp:NAME` lets MCP server NAME start with network access


@dataclass(frozen=True, slots=True, order=True)
class Destination:
    """`host` is lower-case (a name or an IP literal without brackets); `port` None means any port."""

    host: str
    port: int | None = None

    def matches(self, host: str, port: int | None) -> bool:
        return self.host == host.lower().rstrip(".") and (self.port is None or self.port == port)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port is None else f"{host}:{self.port}"


def parse_destination(text: str) -> Destination:
    """`example.com`, `example.com:8080`, `[::1]:8080` or `http://host:port/v1`; ConfigError if not one."""
    raw = text.strip()
    if not raw or any(c.isspace() for c in raw):
        raise ConfigError(f"not a destination: {text!r} (expected host, host:port or a URL)")
    try:  # urlsplit itself raises on `[::1` (an unclosed bracket), .port on a bad port
        url = urlsplit(raw if "://" in raw else f"//{raw}")
        host, port = url.hostname, url.port
    except ValueError as exc:
        raise ConfigError(f"not a destination: {text!r} ({exc})") from exc
    if not host:
        raise ConfigError(f"not a destination: {text!r} (expected host, host:port or a URL)")
    if port == 0:  # `.port` refuses 65536 and up itself; 0 would later read as "no port" (the default)
        raise ConfigError(f"not a destination: {text!r} (port 0 is not a port to connect to)")
    if port is None and url.scheme in _DEFAULT_PORTS:
        port = _DEFAULT_PORTS[url.scheme]
    return Destination(host.lower().rstrip("."), port)


def is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


def is_loopback_name(host: str) -> bool:
    """A name or literal that never leaves the machine (no DNS query is needed for it)."""
    host = host.lower().rstrip(".")
    if host in ("localhost", "localhost.localdomain") or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def answered_locally(host: str) -> bool:
    """A name whose lookup never reaches a resolver: `localhost` itself (the hosts file) or an
    IP literal. `x.localhost` is loopback by RFC 6761, but with `hosts: files dns` glibc asks
    DNS for it, so a lookup of `secret-data.localhost` would carry data off the machine; so
    does `localhost.` (an absolute name the hosts file does not match)."""
    name = host.lower()
    return name in ("localhost", "localhost.localdomain") or is_ip_literal(name)
