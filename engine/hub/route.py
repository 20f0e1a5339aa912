"""Where a download may go: the Hub's own destination, or its published file servers at public addresses.

The Hub answers a resolve URL with the bytes or with a redirect to its file servers. A
redirect is followed only to

- the Hub's own destination (the host and port the user allowed), or
- a host of the Hub's published file servers (`CDN_HOSTS`: for huggingface.co,
  `*.huggingface.co` and `*.hf.co`), over https on port 443 (any scheme and port when the
  Hub itself is on loopback: a test or a local mirror),

and a file server's name is looked up (in the ledger, as the download's) and connected to
only at an address of the Hub's own class: a public address, or loopback/private when the
Hub is one. Never a link-local (cloud metadata), private, unspecified or multicast address
of a Hub that is not. The connection is pinned to the checked address, so a second lookup
cannot answer differently (DNS rebinding). Through a proxy the proxy resolves the name: the
host rule still applies, and an IP literal's class is still checked.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

from engine.hub.errors import DownloadError
from engine.network.destinations import Destination, is_ip_literal, is_loopback_name
from engine.network.guard import EgressRefused, granted

PORTS = {"http": 80, "https": 443}
# The file servers each Hub publishes (a name and every name under it), by the Hub's host.
CDN_HOSTS: dict[str, tuple[str, ...]] = {"huggingface.co": ("huggingface.co", "hf.co")}


@dataclass(frozen=True, slots=True)
class Place:
    """A URL's scheme and destination (the port always given: the scheme's default when none is written)."""

    scheme: str
    destination: Destination


def place_of(url: str) -> Place:
    """The URL's scheme and destination; DownloadError (one line) for a malformed URL or an impossible port."""
    try:
        u = urlsplit(url)
        port = u.port
    except ValueError as exc:  # `[::1` (an unclosed bracket), a port over 65535
        raise DownloadError(f"not an address Ember can follow: {url[:120]!r} ({exc})") from exc
    if u.scheme not in PORTS or not u.hostname:
        raise DownloadError(f"not an address Ember follows: {url[:120]!r}")
    if port == 0:
        raise DownloadError(f"not an address Ember can follow: {url[:120]!r} (port 0)")
    return Place(u.scheme, Destination(u.hostname.lower(), port or PORTS[u.scheme]))


def address_class(ip: str) -> str:
    """`public`, `loopback`, `private`, `link-local`, `unspecified` or `multicast` (IPv4-mapped v6 as v4)."""
    a = ipaddress.ip_address(ip.split("%", 1)[0])
    if isinstance(a, ipaddress.IPv6Address) and a.ipv4_mapped is not None:
        a = a.ipv4_mapped
    if a.is_unspecified:
        return "unspecified"
    if a.is_loopback:
        return "loopback"
    if a.is_link_local:
        return "link-local"
    if a.is_multicast:
        return "multicast"
    return "public" if a.is_global else "private"  # 10/8, 192.168/16, 100.64/10, documentation ranges...


def hub_class(hub: Destination) -> str:
    """The address class of the Hub itself, as far as its address says (a name counts as public)."""
    if is_ip_literal(hub.host):
        return address_class(hub.host)
    return "loopback" if is_loopback_name(hub.host) else "public"


def cdn_hosts(hub: Destination) -> tuple[str, ...]:
    return CDN_HOSTS.get(hub.host, ())


def allowed_words(hub: Destination) -> str:
    """What a download from `hub` may connect to, in words (the consent question names it)."""
    hosts = cdn_hosts(hub)
    if not hosts:
        return f"only {hub}: a redirect anywhere else is refused"
    servers = ", ".join(f"*.{h}" for h in hosts)
    how = "" if hub_class(hub) == "loopback" else " over https, at public addresses only"
    return f"{hub} and its file servers ({servers}){how}, while it runs"


def next_hop(hub: Destination, url: str, location: str | None) -> str:
    """The URL a redirect from `url` leads to, if a download from `hub` may follow it; DownloadError if not."""
    here = place_of(url)
    if not location:
        raise DownloadError(f"{here.destination} redirected without saying where to")
    try:
        target = urljoin(url, location)
    except ValueError as exc:
        raise DownloadError(f"{here.destination} redirected to an address Ember cannot read ({exc})") from exc
    if urlsplit(target).scheme.lower() not in PORTS:
        raise DownloadError(f"{here.destination} redirected to an address Ember does not follow ({target[:80]!r})")
    there = place_of(target)
    if here.scheme == "https" and there.scheme != "https":
        raise DownloadError(f"{here.destination} redirected to an unencrypted address; refused")
    if there.destination != hub and not _is_file_server(hub, there):
        raise DownloadError(
            f"{hub} redirected the download to {there.destination}, which is not {hub} or one of its "
            f"file servers; refused (a download from {hub} may reach {allowed_words(hub)})"
        )
    if is_ip_literal(there.destination.host):
        check_address(hub, there.destination, there.destination.host)
    return target


def _is_file_server(hub: Destination, there: Place) -> bool:
    host = there.destination.host.rstrip(".")
    if not any(host == h or host.endswith("." + h) for h in cdn_hosts(hub)):
        return False
    if hub_class(hub) == "loopback":
        return True
    return there.scheme == "https" and there.destination.port == PORTS["https"]


def check_address(hub: Destination, dest: Destination, ip: str) -> None:
    kind = address_class(ip)
    if kind != "public" and kind != hub_class(hub):
        raise DownloadError(
            f"{dest} is at a {kind} address ({ip}); a download from {hub} never connects there; refused"
        )


def pinned_addresses(hub: Destination, dest: Destination, why: str) -> list[str]:
    """The addresses of file server `dest` to connect to: looked up (in the ledger) and each checked."""
    if is_ip_literal(dest.host):
        check_address(hub, dest, dest.host)
        return [dest.host]
    try:
        with granted(dest, why):
            found = socket.getaddrinfo(dest.host, dest.port, type=socket.SOCK_STREAM)
    except EgressRefused as exc:
        raise DownloadError(str(exc)) from exc
    except (OSError, UnicodeError) as exc:
        raise DownloadError(f"cannot reach {dest}: {exc}") from exc
    addresses = [str(info[4][0]) for info in found]
    if not addresses:
        raise DownloadError(f"cannot reach {dest}: no address")
    for ip in addresses:  # every answer must be fit: a mix of public and private is not a file server
        check_address(hub, dest, ip)
    return list(dict.fromkeys(addresses))
