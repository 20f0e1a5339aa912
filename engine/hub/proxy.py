"""The proxy a Hub request goes through, as the Hugging Face client picks it (httpx's rules).

`HTTPS_PROXY` for https URLs, `HTTP_PROXY` for http ones, `ALL_PROXY` for either, each also
lower-case, and `NO_PROXY` naming hosts that go direct (the standard library's reading of
them, which httpx follows too). Only `http://` proxies are supported for downloads (a CONNECT
tunnel for https). Zero-egress mode still decides: the Hub (or its file server) must be
allowed; the proxy is then permitted to that request alone, and the ledger shows both the
connection to the proxy and what was reached through it.
"""

from __future__ import annotations

import base64
import urllib.request
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from engine.hub.errors import DownloadError
from engine.network.destinations import Destination


@dataclass(frozen=True, slots=True)
class Proxy:
    destination: Destination
    authorization: str | None  # the Proxy-Authorization header when the proxy URL carries a user

    def __str__(self) -> str:
        return str(self.destination)


def proxy_for(url: str) -> Proxy | None:
    """The proxy the environment names for `url`, or None (direct); HubError for one Ember cannot use."""
    env = urllib.request.getproxies_environment()
    u = urlsplit(url)
    host = u.hostname or ""
    text = env.get(u.scheme) or env.get("all")
    if not text or _bypassed(host.lower(), env.get("no", "")):
        return None
    return parse_proxy(text)


def _bypassed(host: str, no_proxy: str) -> bool:
    """Whether NO_PROXY names `host`: `*`, the host itself, or a domain it is under (a leading dot optional)."""
    for entry in no_proxy.split(","):
        name = entry.strip().lower()
        if name.startswith("[") and "]" in name:  # [v6]:port
            name = name[1 : name.index("]")]
        elif name.count(":") == 1:  # host:port (the port is not compared)
            name = name.partition(":")[0]
        name = name.lstrip(".")
        if name == "*" or (name and (host == name or host.endswith("." + name))):
            return True
    return False


def parse_proxy(text: str) -> Proxy:
    raw = text.strip() if "://" in text else f"http://{text.strip()}"
    try:
        u = urlsplit(raw)
        port = u.port
    except ValueError as exc:
        raise DownloadError(f"not a proxy address: {text[:120]!r} ({exc})") from exc
    if u.scheme != "http" or not u.hostname or port == 0:
        raise DownloadError(
            f"the proxy {text[:120]!r} is not one Ember can use for downloads (an http://host:port proxy is needed)"
        )
    auth = None
    if u.username is not None:
        pair = f"{unquote(u.username)}:{unquote(u.password or '')}".encode()
        auth = "Basic " + base64.b64encode(pair).decode("ascii")
    return Proxy(Destination(u.hostname.lower(), port or 80), auth)
