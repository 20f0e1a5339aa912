"""Every error the engine raises, in one tree (its root, EmberError, lives in models.errors).

    EmberError
    ├── GGUFError (models)      a model file's header cannot be read
    ├── Cancelled               work stopped because its cancel check said so (not a failure): a
    │                           download (hub.errors.DownloadCancelled, also a DownloadError),
    │                           an index, an embedding
    └── EngineError
        ├── ModelLoadError          a model file that will not load (missing, not GGUF, truncated…)
        ├── ConfigError             bad settings or arguments reaching the engine
        ├── NoModelError            a turn was asked of an engine with no model loaded
        ├── BenchError              a benchmark's probe or child process failed
        ├── HistoryError (engine.history.types)  the history database failed (sqlite3 errors
        │                           are translated at the store's boundary)
        └── LLMError                a model request that failed
            ├── ContextOverflowError    the prompt does not fit the context window
            ├── BackendError            the backend broke (decode failure, transport failure)
            ├── ScriptExhaustedError    a ScriptedBackend ran out of replies
            ├── MalformedReplyError     raised only by the turn policy after one failed recovery
            └── StructuredOutputError   structured output failed after its bounded retries

Each turn failure maps to one `engine.events.TurnErrorKind` (`engine.turns.runner.error_kind`).
"""

from __future__ import annotations

from models.errors import EmberError, LoadFailure


class Cancelled(EmberError):
    """Work stopped between two pieces because its cancel check said so: not a failure, so no
    EngineError (a handler that reports the engine's failures does not take it for one)."""


class EngineError(EmberError):
    """Base of every engine error; the message is one readable line."""


class ModelLoadError(EngineError):
    """A model could not be loaded; the message names the file and the real reason, `kind` what
    kind of failure it is (a window shows its sentence)."""

    def __init__(self, message: str, kind: LoadFailure = LoadFailure.OTHER) -> None:
        super().__init__(message)
        self.kind = kind


class ConfigError(EngineError):
    """Settings or arguments the engine cannot use."""


class NoModelError(EngineError):
    """A turn was asked of an engine with no model loaded."""


class BenchError(EngineError):
    """A benchmark could not measure: a probe or child process failed."""


class LLMError(EngineError):
    """A model request failed."""


class ContextOverflowError(LLMError):
    """The conversation no longer fits in the model's context window."""


class BackendError(LLMError):
    """The backend failed while producing a reply."""


class ScriptExhaustedError(LLMError):
    """A scripted backend was asked for more replies than its script holds."""


class MalformedReplyError(LLMError):
    """The reply and its one recovery were both empty after the guardrail."""

    MESSAGE = "The model returned a malformed reply — please try again."

    def __init__(self, message: str = MESSAGE) -> None:
        super().__init__(message)


class StructuredOutputError(LLMError):
    """Structured output failed; `last_error` is the last parse or validation error."""

    def __init__(self, last_error: str) -> None:
        super().__init__(last_error)
        self.last_error = last_error
