"""The Hub's errors: each message is the one line to show (what happened, and what to do)."""

from __future__ import annotations

from engine.errors import Cancelled, EngineError

TOKEN_HOW = "set HF_TOKEN, or run `hf auth login`"


class HubError(EngineError):
    """Searching, listing or downloading from the Hub failed."""


class DownloadError(HubError):
    """A download failed; whatever was received is kept as `.part` for the next try unless it was bad."""


class DownloadCancelled(DownloadError, Cancelled):
    """The user cancelled; the `.part` files stay, so the next pull resumes where this one stopped."""


def gated_line(repo: str, status: int, has_token: bool) -> str:
    if has_token:
        return (
            f"{repo} is gated and this token may not read it (HTTP {status}): accept its licence on the "
            f"repository's page with the account the token belongs to"
        )
    return f"{repo} is gated or private (HTTP {status}): accept its licence on the Hub, then {TOKEN_HOW}"


def status_line(what: str, status: int) -> str:
    if status == 404:
        return f"{what}: not found on the Hub (HTTP 404)"
    if status == 429:
        return f"{what}: the Hub is rate-limiting requests (HTTP 429); try again later"
    if 500 <= status < 600:
        return f"{what}: the Hub answered with a server error (HTTP {status}); try again later"
    return f"{what}: the Hub answered HTTP {status}"
