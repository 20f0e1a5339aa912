"""What the window shows when a turn ends without an answer: readable copy and the banner's action (no Qt)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from engine.api.conversations import MAX_STRUCTURED_RETRIES, error_kind
from engine.api.errors import MalformedReplyError
from engine.api.values import ContextFullError, MessageTooLongError, TurnErrorKind


class FailureAction(StrEnum):
    """What a failure banner offers."""

    RETRY = "retry"
    NEW_CONVERSATION = "new_conversation"
    DROP_OLDER = "drop_older"  # keep chatting with the older messages left out


@dataclass(frozen=True, slots=True)
class TurnFailure:
    """What the view shows when a turn ends without an answer."""

    kind: str
    text: str
    action: FailureAction | None = None


CONTEXT_STOP, MESSAGE_TOO_LONG = "context_stop", "message_too_long"
# Readable copy for each kind of failure, and the banner's action; the malformed copy is exact by contract.
_FAILURES: dict[str, tuple[str, FailureAction | None]] = {
    TurnErrorKind.MALFORMED_REPLY: (MalformedReplyError.MESSAGE, FailureAction.RETRY),
    TurnErrorKind.CONTEXT_FULL: (
        "This conversation no longer fits in the model's context window. Start a new conversation to keep chatting.",
        FailureAction.NEW_CONVERSATION,
    ),
    TurnErrorKind.NO_MODEL: ("No model is loaded{reason}", None),
    TurnErrorKind.SCRIPT: ("The scripted backend has no reply for this message. ({message})", None),
    TurnErrorKind.CONFIG: ("Ember could not send this request: {message}", None),
    TurnErrorKind.STRUCTURED_OUTPUT: (
        f"The model did not return valid JSON after {1 + MAX_STRUCTURED_RETRIES} attempts. Last error: {{message}}",
        FailureAction.RETRY,
    ),
    TurnErrorKind.BACKEND: ("The model stopped with an error: {message}", FailureAction.RETRY),
    # The context policy's refusals (front-end kinds; recorded as context_full or config).
    CONTEXT_STOP: (
        "This conversation has reached the model's context limit: {message}. "
        "Keep chatting by leaving older messages out of what the model sees.",
        FailureAction.DROP_OLDER,
    ),
    MESSAGE_TOO_LONG: ("This message was not sent: {message}. Your draft is kept.", None),
}
HISTORY_PROBLEM = "history"  # the conversation could not be written: the message was not sent


def refusal_kind(exc: BaseException) -> str:
    """The failure kind the view shows for the refusal `exc`."""
    if isinstance(exc, ContextFullError):
        return CONTEXT_STOP
    if isinstance(exc, MessageTooLongError):
        return MESSAGE_TOO_LONG
    return error_kind(exc)


def failure_for(kind: str, message: str) -> TurnFailure:
    """What the view shows for a turn that failed with `kind`."""
    if kind == HISTORY_PROBLEM:
        return TurnFailure(kind, f"This message was not sent: {message}. Your draft is kept.")
    text, action = _FAILURES.get(kind, _FAILURES[TurnErrorKind.BACKEND])
    return TurnFailure(kind, text.format(message=message, reason=f": {message}" if message else "."), action)
