"""Every error the engine raises, in one tree.

    EngineError
    ├── ModelLoadError          a model file that will not load (missing, not GGUF, truncated…)
    ├── ConfigError             bad settings or arguments reaching the engine
    └── LLMError                a model request that failed
        ├── ContextOverflowError    the prompt does not fit the context window
        ├── BackendError            the backend broke (decode failure, transport failure)
        ├── ScriptExhaustedError    a ScriptedBackend ran out of replies
        ├── MalformedReplyError     raised only by the turn policy after one failed recovery
        └── StructuredOutputError   structured output failed after its bounded retries
"""

from __future__ import annotations


class EngineError(Exception):
    """Base of every engine error; the message is one readable line."""


class ModelLoadError(EngineError):
    """A model could not be loaded; the message names the file and the real reason."""


class ConfigError(EngineError):
    """Settings or arguments the engine cannot use."""


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
