"""Errors in OpenAI's shape: `{"error": {"message", "type", "param", "code"}}` with the right status.

Every refusal the server makes goes through `ApiError`, so clients written for OpenAI
(the official SDK raises `BadRequestError`, `RateLimitError`, … from the status) read them.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError
from starlette.responses import JSONResponse

from engine.api.values import TurnError, TurnErrorKind

INVALID = "invalid_request_error"
SERVER = "server_error"

_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: INVALID,
    413: INVALID,
    429: "rate_limit_error",
    501: "not_implemented_error",
    503: "service_unavailable",
}


class ApiError(Exception):
    """A request the server answers with an error; `headers` e.g. Retry-After on a 429."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        kind: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.kind = kind or (_TYPES.get(status, INVALID) if status < 500 else _TYPES.get(status, SERVER))
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}

    def response(self, path: str = "") -> JSONResponse:
        """The error as OpenAI's clients read it, or Ollama's (`{"error": "…"}`) on its `/api/…` paths."""
        body = {"error": self.message} if is_ollama_path(path) else self.body()
        return JSONResponse(body, status_code=self.status, headers=self.headers)


def is_ollama_path(path: str) -> bool:
    """Ollama's API, whose clients read `error` as a string."""
    return path == "/api" or path.startswith("/api/")


def bad_request(message: str, param: str | None = None, code: str | None = None) -> ApiError:
    return ApiError(400, message, param=param, code=code)


def invalid(exc: ValidationError) -> ApiError:
    """A request model's refusal as one line naming its first bad field: `'messages[0].role' must
    be 'system', 'developer', …, got "wizard"` with `param` "messages[0].role". A validator's own
    refusal is a ValueError whose text follows the field's name."""
    error = exc.errors(include_url=False, include_context=False)[0]
    param = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"]).lstrip(".")
    kind, value = error["type"], error.get("input")
    said = _SAID.get(kind) or re.sub(_PYDANTIC_WORDS, _must, error["msg"])
    quiet = kind in ("missing", "value_error") or isinstance(value, (dict, list))  # nothing short to quote
    return bad_request(f"'{param or 'body'}' {said}{'' if quiet else f', got {_short(value)}'}", param or None)


_SAID = {
    "missing": "is required",
    "model_type": "must be an object",
    "dict_type": "must be an object",
    "list_type": "must be an array",
    "string_type": "must be a string",
    "int_type": "must be a whole number",
    "float_type": "must be a number",
    "bool_type": "must be a boolean",
}
# "Input should be …" is Ember's "must be …"; "Value error, " leads a validator's own words.
_PYDANTIC_WORDS = re.compile(r"^\w+ should|^Value error, | after validation|, not \d+$")


def _must(match: re.Match[str]) -> str:
    return "must" if match.group(0).endswith("should") else ""


def _short(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False) if not isinstance(value, float) else repr(value)
    except (TypeError, ValueError):
        text = type(value).__name__
    return text if len(text) <= 40 else text[:39] + "…"


# A turn that failed before anything was sent becomes an HTTP error: the client's fault
# (the conversation does not fit, the request cannot be rendered) is a 4xx, the model's a 5xx.
_TURN_STATUS: dict[TurnErrorKind, tuple[int, str | None]] = {
    TurnErrorKind.CONTEXT_FULL: (400, "context_length_exceeded"),
    TurnErrorKind.CONFIG: (400, None),
    TurnErrorKind.NO_MODEL: (503, "model_not_loaded"),
}


def turn_error(error: TurnError) -> ApiError:
    status, code = _TURN_STATUS.get(error.kind, (500, str(error.kind)))
    return ApiError(status, error.message, code=code)
