"""The browser gate in front of every route: Host, Origin, CORS and Content-Type, before any work.

Order matters: a request from a page that may not call (wrong `Host`: DNS rebinding; an
`Origin` off the allow list) is refused with 403 before its body is read, so it neither
runs the model nor reaches `--record`. A POST that is not JSON is a 415: a `text/plain` or
form body is what a page sends to dodge the CORS preflight. A missing Content-Type is read
as JSON: browsers only omit it for bodies that also carry `Origin`, checked above, and
plain HTTP clients (Python's `http.client`) omit it. Ollama's `/api/…` read any body as JSON
when the request has no `Origin`: Ollama's own documented examples post with `curl -d`
(a form Content-Type), and a browser always sends `Origin` on a cross-site POST, so a page
still meets the check.

Allowed origins get CORS headers on every response (errors too, so a page can read why)
and a preflight answered with 204.
"""

from __future__ import annotations

import re

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from desktop.serve.errors import ApiError, is_ollama_path
from desktop.serve.origins import HostPolicy, OriginPolicy

METHODS = "GET, POST, OPTIONS"
BASE_HEADERS = ("authorization", "content-type")
MAX_AGE_S = 600  # browsers cache the preflight this long (Chrome caps it at 7200)
_TOKEN = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~\-]{1,64}")
_MAX_REQUESTED = 32  # headers a preflight may ask for (the openai JS SDK asks for about 12)


class BrowserGate:
    """ASGI middleware: refuses what a hostile page could send, and answers CORS for allowed origins."""

    def __init__(self, app: ASGIApp, origins: OriginPolicy, hosts: HostPolicy | None) -> None:
        self.app = app
        self.origins = origins
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await refusal.response(scope["path"])(scope, receive, send)
            return
        origin = headers.get("origin")
        if scope["method"] == "OPTIONS":
            await _preflight(origin, headers)(scope, receive, send)
            return
        await self.app(scope, receive, _with_cors(send, origin))

    def _refusal(self, scope: Scope, headers: Headers) -> ApiError | None:
        hosts = headers.getlist("host")
        if self.hosts is not None and (len(hosts) > 1 or any(not self.hosts.allows(h) for h in hosts)):
            return ApiError(
                403,
                "the Host header names another site: this server answers only to localhost and "
                "the address it listens on",
                code="host_not_allowed",
            )
        origins = headers.getlist("origin")
        if len(origins) > 1 or any(not self.origins.allows(o) for o in origins):
            return ApiError(
                403,
                "this origin may not call the server (allow it with ember serve --allow-origin "
                "ORIGIN or EMBER_ORIGINS)",
                code="origin_not_allowed",
            )
        if scope["method"] == "POST" and (origins or not is_ollama_path(scope["path"])):
            return _content_type_refusal(headers.get("content-type"))
        return None


def _content_type_refusal(value: str | None) -> ApiError | None:
    if value is None or not value.strip():
        return None
    media, *params = (part.strip().lower() for part in value.split(";"))
    charset = next((p.partition("=")[2].strip('" ') for p in params if p.startswith("charset=")), "utf-8")
    if media == "application/json" and charset in ("utf-8", "utf8"):
        return None
    return ApiError(
        415,
        f"the request body must be JSON (Content-Type: application/json), not {value.strip()[:80]!r}",
        code="unsupported_media_type",
    )


def _preflight(origin: str | None, headers: Headers) -> Response:
    """204 with what an allowed origin may send; without `Origin`, just the methods (`Allow`)."""
    if origin is None:
        return Response(status_code=204, headers={"Allow": METHODS})
    allowed = {*BASE_HEADERS, *_requested_headers(headers.get("access-control-request-headers", ""))}
    answer = {
        "Access-Control-Allow-Origin": origin,
        "Access-Control-Allow-Methods": METHODS,
        "Access-Control-Allow-Headers": ", ".join(sorted(allowed)),
        "Access-Control-Max-Age": str(MAX_AGE_S),
        "Vary": "Origin, Access-Control-Request-Method, Access-Control-Request-Headers",
    }
    if headers.get("access-control-request-private-network", "").lower() == "true":
        answer["Access-Control-Allow-Private-Network"] = "true"  # Chrome's Private Network Access
    return Response(status_code=204, headers=answer)


def _requested_headers(value: str) -> list[str]:
    """The header names a preflight asks for (the origin is trusted: any well-formed name may come)."""
    names = [n.strip().lower() for n in value.split(",")[:_MAX_REQUESTED]]
    return [n for n in names if _TOKEN.fullmatch(n)]


def _with_cors(send: Send, origin: str | None) -> Send:
    async def send_with_cors(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = MutableHeaders(scope=message)
            headers.add_vary_header("Origin")
            if origin is not None:
                headers["Access-Control-Allow-Origin"] = origin
                headers["Access-Control-Expose-Headers"] = "Retry-After"
        await send(message)

    return send_with_cors
