"""Does a model's chat template work? Compile it and render a probe conversation.

`ember models` uses this to flag a template that would fail (or be stopped by its limits,
see `engine.llama.template_limits`) on the first message, before anyone loads the model.
"""

from __future__ import annotations

from engine.errors import ConfigError
from engine.llama.template import ChatTemplate

# The smallest conversation every chat template must render: no system message, which
# some templates refuse on purpose (e.g. "System role not supported").
PROBE = (
    {"role": "user", "content": "Hello"},
    {"role": "assistant", "content": "Hi! How can I help?"},
    {"role": "user", "content": "Tell me a joke."},
)


def template_problem(source: str | None, *, bos_token: str = "", eos_token: str = "") -> str | None:
    """None when `source` compiles and renders the probe conversation; else why not (one line).

    A GGUF without a template gets llama.cpp's built-in format for its architecture or a
    plain transcript (`models.gguf.builtin_templates`): neither is a Jinja template to check.
    """
    if source is None:
        return None
    try:
        rendered = ChatTemplate(source, bos_token=bos_token, eos_token=eos_token).render(list(PROBE))
    except ConfigError as exc:
        return str(exc)
    if "Tell me a joke." not in rendered:
        return "this model's chat template leaves the user's message out of the prompt"
    return None
