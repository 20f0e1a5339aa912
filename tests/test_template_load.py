"""A hostile chat template is stopped before any `Llama()` is built (the regression in issue 38).

llama-cpp-python's `Llama.__init__` compiles every `tokenizer.chat_template*` in the file with
its own Jinja environment, whose constant folding evaluates `'x' * 3000000000` at compile time.
Ember checks the template in its bounded sandbox first, and builds every Llama without the
templates (engine.llama.llama_plain). Each load here runs `ember chat --model` in a child
with a time limit and an address-space limit, so a regression fails the test instead of the
machine.
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests import gguf_factory as gf

ROOT = Path(__file__).resolve().parent.parent
LIMIT_S = 90  # a load takes about a second; the hostile ones took over 120 s and 8.8 GB
ADDRESS_SPACE = 4 << 30  # a 3 GB string cannot be made within it; Ember needs far less

# Shapes that ask for gigabytes in one step; all but `set power` are folded by Jinja while compiling
# (the `set` one is evaluated only when rendered, where Ember's sandbox refuses it too).
FOLDED = {
    "multiply": "{{ 'x' * 3000000000 }}",
    "set power": "{% set a = 'x' * 10**10 %}{{ a }}",
    "concat": "{{ 'ab' ~ ('x' * 4000000000) }}",
    "filter": "{{ 'x' | center(3000000000) }}",
    "format": "{{ '%3000000000d' % 1 }}",
}


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def _chat(model: Path, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "desktop",
            "chat",
            "--model",
            str(model),
            "--no-history",
            "--max-tokens",
            "2",
            "--threads",
            "1",
            "--ctx",
            "2048",
            "hi",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=LIMIT_S,
        preexec_fn=_limited,
        env={**os.environ, "EMBER_HOME": str(home)},
    )


@pytest.mark.slow  # starts a process
@pytest.mark.parametrize("shape", sorted(FOLDED))
def test_a_folding_template_ends_in_one_line(shape: str, tmp_path: Path, ember_home: Path) -> None:
    model = gf.write_tiny_llama(tmp_path / "hostile.gguf", gf.CHATML + FOLDED[shape])
    done = _chat(model, ember_home)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "chat template" in lines[0] and re.search("too (large|wide) to use", lines[0]), lines[0]


@pytest.mark.slow  # starts a process
def test_a_named_template_never_reaches_llama_cpp_python(tmp_path: Path, ember_home: Path) -> None:
    """`tokenizer.chat_template.NAME` is compiled by llama-cpp-python too; Ember uses only the default."""
    model = gf.write_tiny_llama(
        tmp_path / "named.gguf", gf.CHATML, extra={"tokenizer.chat_template.tool_use": FOLDED["multiply"]}
    )
    done = _chat(model, ember_home)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr


def test_the_plain_llama_holds_no_template(tmp_path: Path) -> None:
    from engine.llama.cpu import ensure_cpu_runs
    from engine.llama.llama_plain import new_llama

    ensure_cpu_runs()  # registers llama.cpp's CPU backend, as every load does
    model = gf.write_tiny_llama(tmp_path / "m.gguf", gf.CHATML, extra={"tokenizer.chat_template.rag": gf.LLAMA3})
    llm = new_llama(model_path=str(model), n_ctx=64, n_threads=1, verbose=False)
    try:
        assert not any(k.startswith("tokenizer.chat_template") for k in llm.metadata)
        assert llm.metadata["general.architecture"] == "llama"
        assert llm._chat_handlers == {}  # pyright: ignore[reportPrivateUsage]
    finally:
        llm.close()
