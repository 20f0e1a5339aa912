"""The value types the front ends hold and pass back: one import for what the engine hands out.

The window, the CLI and the server keep these (a conversation row, a message's versions, an
image, a context policy, the backend they were given, a cancel token) without reaching into
the package that defines each. Nothing here has behaviour of its own: it names them once.
"""

from __future__ import annotations

from engine.backends.base import Backend, CancelToken, Message, Request, Sampling, Schema
from engine.backends.image_input import (
    MAX_MESSAGE_IMAGES,
    MAX_PIXELS,
    ImageData,
    NotAFile,
    base64_length,
    check_image,
    from_base64,
    from_data_url,
    read_image_file,
    sniff_file,
)
from engine.history.times import as_datetime
from engine.history.types import (
    HIGHLIGHT_END,
    HIGHLIGHT_START,
    TOOLS_STATS_KEY,
    Conversation,
    HistoryError,
    NotFoundError,
    SearchHit,
    Status,
    StoredMessage,
    Versions,
)
from engine.turns.context_policy import (
    DIVIDER_TEXT,
    ContextFullError,
    ContextPolicy,
    Fit,
    MessageTooLongError,
)

__all__ = [
    "DIVIDER_TEXT",
    "HIGHLIGHT_END",
    "HIGHLIGHT_START",
    "MAX_MESSAGE_IMAGES",
    "MAX_PIXELS",
    "TOOLS_STATS_KEY",
    "Backend",
    "CancelToken",
    "ContextFullError",
    "ContextPolicy",
    "Conversation",
    "Fit",
    "HistoryError",
    "ImageData",
    "Message",
    "MessageTooLongError",
    "NotAFile",
    "NotFoundError",
    "Request",
    "Sampling",
    "Schema",
    "SearchHit",
    "Status",
    "StoredMessage",
    "Versions",
    "as_datetime",
    "base64_length",
    "check_image",
    "from_base64",
    "from_data_url",
    "read_image_file",
    "sniff_file",
]
