"""A model's chat template cannot hang, exhaust memory or crash a turn (issue #14).

Every hostile template ends in ConfigError with one line beginning "this model's chat
template" (or "the model's chat template" when it does not even compile), quickly.
"""

from __future__ import annotations

import json
from pathlib import Path

import gguf_factory as gf
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from desktop.cli.main import main
from engine.errors import ConfigError
from engine.llama import template_limits
from engine.llama.template import ChatTemplate
from engine.llama.template_probe import template_problem

MESSAGES = [{"role": "user", "content": "hi"}]

HOSTILE = {
    "nested loops": "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
    "reused range": "{% set r = range(100000) %}{% for a in r %}{% for b in r %}{% endfor %}{% endfor %}",
    "folded multiply": "{{ 'x' * 3000000000 }}",
    "list multiply": "{{ ([1] * 3000000000)|length }}",
    "recursive macro": "{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}",
    "center filter": "{{ 'x'|center(3000000000) }}",
    "ljust method": "{{ 'x'.ljust(3000000000) }}",
    "percent width": "{{ '%999999999d' % 1 }}",
    "format width": "{{ '{:>999999999}'.format(1) }}",
    "huge power": "{{ 2 ** 1000000000 }}",
    "output flood": "{% for a in range(100000) %}{{ 'x' * 100000 }}{% endfor %}",
    "indent filter": "{{ 'a\nb'|indent(3000000000) }}",
    "tojson indent": "{{ messages|tojson(indent=3000000000) }}",
    "3.6 MB of trivial expressions": gf.CHATML + "{{ '' }}" * 450_000,  # compiling alone took a minute
}


@pytest.fixture(autouse=True)
def _short_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(template_limits, "RENDER_SECONDS", 0.5)


@pytest.mark.timeout(60)  # a hang fails here instead of stalling the suite
@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_templates_end_in_one_line_quickly(name: str) -> None:
    with pytest.raises(ConfigError) as info:
        ChatTemplate(HOSTILE[name]).render(MESSAGES)
    message = str(info.value)
    assert message.startswith(("this model's chat template", "the model's chat template")), message
    assert "\n" not in message


def test_raise_exception_from_a_template_is_one_line() -> None:
    with pytest.raises(ConfigError, match=r"^this model's chat template failed to render: No system role here$"):
        ChatTemplate("{{ raise_exception('No system role\nhere') }}").render(MESSAGES)


def test_ordinary_templates_still_render() -> None:
    for source in (gf.CHATML, gf.LLAMA3, gf.GEMMA, gf.QWEN3_THINKING):
        text = ChatTemplate(source, bos_token="<s>").render([{"role": "user", "content": "hello"}] * 50)
        assert text.count("hello") == 50


def test_a_long_conversation_is_not_cut_by_the_output_limit() -> None:
    long = [{"role": "user", "content": "w " * 500_000}]  # 1 MB of input
    assert len(ChatTemplate(gf.CHATML).render(long)) > 1_000_000


# Templates built from random pieces of Jinja: whatever they do, the answer is a string or
# one ConfigError line, within the deadline.
pieces = st.sampled_from(
    [
        "{% for a in range(N) %}",
        "{% endfor %}",
        "{{ 'x' * N }}",
        "{{ N ** N }}",
        "{{ messages[0].content }}",
        "{% macro m(k) %}{{ m(k) }}{% endmacro %}",
        "{{ m(1) }}",
        "{{ 'ab'|center(N) }}",
        "{{ '%Nd' % 1 }}",
        "{% set ns = namespace(s='') %}",
        "{% set ns.s = ns.s ~ 'yy' * N %}",
        "{{ range(N)|list|join(',') }}",
    ]
)


@pytest.mark.timeout(300)
@settings(max_examples=40, deadline=None)
@given(st.lists(pieces, min_size=1, max_size=6), st.sampled_from(["3", "99", "5000", "100000", "3000000000"]))
def test_random_templates_render_or_fail_in_one_line(parts: list[str], n: str) -> None:
    source = "".join(parts).replace("N", n)
    error = ""
    try:
        ChatTemplate(source).render(MESSAGES)
    except ConfigError as exc:
        error = str(exc)
    assert "\n" not in error


# -- `ember models` flags a template that will not work ---------------------------------


def test_template_problem_probe() -> None:
    assert template_problem(gf.CHATML) is None
    assert template_problem(None) is None  # no template: a built-in format or a plain transcript
    assert template_problem("{{ 'x' * 3000000000 }}") is not None
    assert "does not parse" in str(template_problem("{% for %}"))
    assert "leaves the user's message out" in str(template_problem("<|im_start|>assistant\n"))


def test_ember_models_flags_a_broken_template(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = gf.write_tiny_llama(tmp_path / "bad.gguf", HOSTILE["nested loops"])
    good = gf.write_tiny_llama(tmp_path / "good.gguf", gf.CHATML)
    assert main(["models", "--json", str(bad), str(good)]) == 0
    bad_info, good_info = json.loads(capsys.readouterr().out)
    assert "took longer than" in bad_info["template_problem"]
    assert good_info["template_problem"] is None
    assert main(["models", str(bad)]) == 0
    out = capsys.readouterr().out
    assert any(line.startswith("template problem") and "took longer" in line for line in out.splitlines())


def test_a_huge_template_is_refused_before_it_compiles(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import time

    huge = gf.write_tiny_llama(tmp_path / "huge.gguf", gf.CHATML + "{{ '' }}" * 450_000)
    start = time.perf_counter()
    assert main(["models", "--json", str(huge)]) == 0
    (info,) = json.loads(capsys.readouterr().out)
    assert "at most 65,536 are compiled" in info["template_problem"]
    assert time.perf_counter() - start < 30  # a guard against the minute-long compile, not a target
