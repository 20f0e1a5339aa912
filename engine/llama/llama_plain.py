"""`llama_cpp.Llama` without llama-cpp-python's own chat formatters.

`Llama.__init__` builds a `Jinja2ChatFormatter` for every `tokenizer.chat_template*` string in
the model's metadata, whatever `chat_format` or `chat_handler` it is given. Building one
compiles the template, and Jinja's constant folding evaluates `{{ 'x' * 3000000000 }}` while
compiling: gigabytes and minutes in one step, before Ember's bounded environment
(engine.llama.template_limits) ever sees the template. Ember renders prompts with its own
`ChatTemplate` and never calls `create_chat_completion`, so every `Llama` it builds comes from
here: its `metadata` drops the templates as `__init__` stores it, and no formatter is built.

    llm = new_llama(model_path=..., n_ctx=...)

Code that does call `create_chat_completion` (the bench's raw side) gets `chat_handler`: the
prompt rendered by Ember's bounded template, the rest llama-cpp-python's own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

log = logging.getLogger("engine.llama")

TEMPLATE_KEY = "tokenizer.chat_template"  # and `tokenizer.chat_template.NAME` for named ones

_class: type[Any] | None = None


def without_templates(metadata: Mapping[str, str]) -> dict[str, str]:
    """`metadata` less every chat template."""
    return {k: v for k, v in metadata.items() if not k.startswith(TEMPLATE_KEY)}


def llama_class() -> type[Any]:
    """The `Llama` subclass (built on first use: importing llama_cpp loads the native library)."""
    global _class
    if _class is None:
        import llama_cpp

        class PlainLlama(llama_cpp.Llama):
            """A Llama whose metadata never holds a chat template (see the module), and that
            reports its load's progress to `on_progress` (0.0 … 1.0, on the loading thread)."""

            def __init__(self, *args: Any, on_progress: Callable[[float], None] | None = None, **kwargs: Any) -> None:
                self.__dict__["_on_progress"] = on_progress
                super().__init__(*args, **kwargs)  # pyright: ignore[reportUnknownMemberType]

            @property
            def model_params(self) -> Any:  # pyright: ignore[reportIncompatibleVariableOverride]
                return self.__dict__["_model_params"]

            @model_params.setter
            def model_params(self, value: Any) -> None:
                # `__init__` stores the defaults here before loading: the one moment to add the callback.
                on_progress = self.__dict__.get("_on_progress")
                if on_progress is not None and "_progress_cb" not in self.__dict__:
                    callback = llama_cpp.llama_progress_callback(_progress_callback(on_progress))
                    self.__dict__["_progress_cb"] = callback  # kept alive as long as the model
                    value.progress_callback = callback
                self.__dict__["_model_params"] = value

            @property
            def metadata(self) -> dict[str, str]:  # pyright: ignore[reportIncompatibleVariableOverride]
                return self.__dict__.get("_plain_metadata", {})

            @metadata.setter
            def metadata(self, value: Mapping[str, str]) -> None:
                self.__dict__["_plain_metadata"] = without_templates(value)

        _class = PlainLlama
    return _class


def new_llama(**kwargs: Any) -> Any:
    """`llama_cpp.Llama(**kwargs)`, minus the chat formatters (`on_progress=`: the load's progress)."""
    return llama_class()(**kwargs)


def _progress_callback(on_progress: Callable[[float], None]) -> Callable[[float, Any], bool]:
    def call(progress: float, _user_data: Any) -> bool:
        try:
            on_progress(float(progress))
        except Exception:  # an exception cannot cross into C, and returning False would abort the load
            log.exception("the load's progress could not be shown")
        return True

    return call


def chat_handler(render: Callable[[list[dict[str, Any]]], str], eos_token: str, eos_id: int) -> Any:
    """A llama-cpp-python chat handler whose prompt comes from `render` (Ember's bounded template).

    It answers as the `Jinja2ChatFormatter` it replaces would: stop at the EOS text or token.
    """
    import llama_cpp
    from llama_cpp import llama_chat_format

    def stop_on_eos(tokens: Any, logits: Any) -> bool:
        return int(tokens[-1]) == eos_id

    def formatter(*, messages: Any, **_: Any) -> Any:
        return llama_chat_format.ChatFormatterResponse(
            prompt=render([dict(m) for m in cast(Sequence[Mapping[str, Any]], messages)]),
            stop=[eos_token] if eos_token else None,
            stopping_criteria=llama_cpp.StoppingCriteriaList([stop_on_eos]) if eos_id >= 0 else None,
            added_special=True,
        )

    return llama_chat_format.chat_formatter_to_chat_completion_handler(formatter)
