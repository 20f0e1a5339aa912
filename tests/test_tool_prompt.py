"""Tools for templates that ignore them: described in the system message, calls kept as markup."""

from __future__ import annotations

from gguf_factory import CHATML as CHATML_TEMPLATE  # a ChatML template that never reads `tools`

from engine.llama.template import ChatTemplate
from engine.llama.tool_prompt import TOOLS_INTRO, fallback_for

TOOLS = ({"type": "function", "function": {"name": "current_time", "description": "The time.", "parameters": {}}},)
THREAD = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What time is it?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "current_time", "arguments": {}}}],
    },
    {"role": "tool", "tool_call_id": "call_1", "name": "current_time", "content": "12:00"},
]
TOOL_AWARE = "{% if tools %}TOOLS:{{ tools | tojson }}{% endif %}{% for m in messages %}{{ m.content }}{% endfor %}"


def test_a_template_that_ignores_tools_gets_them_in_the_system_message() -> None:
    messages, tools = fallback_for(CHATML_TEMPLATE, THREAD, TOOLS)
    assert tools is None
    assert messages[0]["content"].startswith("Be brief.\n\n" + TOOLS_INTRO)
    assert '"name": "current_time"' in messages[0]["content"]
    assert messages[2] == {
        "role": "assistant",
        "content": '<tool_call>{"name": "current_time", "arguments": {}}</tool_call>',
    }
    prompt = ChatTemplate(CHATML_TEMPLATE).render(messages)
    assert "<tool_call>" in prompt and "12:00" in prompt and "current_time" in prompt


def test_a_template_that_renders_tools_is_left_alone() -> None:
    messages, tools = fallback_for(TOOL_AWARE, THREAD, TOOLS)
    assert (messages, tools) == (THREAD, TOOLS)


def test_without_tools_nothing_changes() -> None:
    plain = THREAD[:2]
    assert fallback_for(CHATML_TEMPLATE, plain, None) == (plain, None)
    no_system, _ = fallback_for(CHATML_TEMPLATE, plain[1:], TOOLS)
    assert no_system[0]["role"] == "system" and no_system[0]["content"].startswith(TOOLS_INTRO)
