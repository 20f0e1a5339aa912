"""Every child process Ember starts imports Ember's modules, never the current folder's (CW-01…04).

Each kind of child is started from a folder holding an `engine/` package, a `struct.py` and a
`json.py` that each write a marker file when imported, as a downloaded folder or another project
could. None of them may run, and each child must still do its work.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engine.child_env import child_env
from engine.llama import cpu, grammar_guard
from tests.bench import llama as bench_llama

ROOT = Path(__file__).resolve().parent.parent
PLANTED = ("engine/__init__.py", "struct.py", "json.py")


@pytest.fixture
def hostile_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The current folder, holding modules that write `MARK` when imported; returns MARK."""
    folder, mark = tmp_path / "downloaded", tmp_path / "MARK"
    (folder / "engine").mkdir(parents=True)
    for name in PLANTED:
        code = f"open({str(mark)!r}, 'a').write({name!r} + ' ran\\n')\n"
        if name.startswith("engine/"):  # then behave like the real package, as an attacker would
            code += f"__path__ = [{str(ROOT / 'engine')!r}]\n"
        (folder / name).write_text(code)
    monkeypatch.chdir(folder)
    return mark


def _ran(mark: Path) -> str:
    return mark.read_text() if mark.exists() else ""


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
def test_the_grammar_checker_is_isolated(hostile_cwd: Path, smollm_path: Path) -> None:
    grammar_guard.forget()
    problem = grammar_guard._check_in_child(smollm_path, 'root ::= "yes" | "no"\n')  # pyright: ignore[reportPrivateUsage]
    assert _ran(hostile_cwd) == ""
    assert problem == ""  # usable: the checker still works


@pytest.mark.slow  # starts a process or uses the real model (tests/slow_marks.py)
def test_the_cpu_probe_is_isolated(hostile_cwd: Path) -> None:
    verdict = cpu.probe()
    assert _ran(hostile_cwd) == ""
    assert verdict.runs is True, verdict.detail


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
def test_the_cpu_variant_probes_are_isolated(hostile_cwd: Path) -> None:
    folder = cpu.lib_dir()
    files = cpu.variant_files(folder) if folder else {}
    if not files:
        pytest.skip("this llama.cpp build has no run-time CPU variants")
    name, path = next(iter(files.items()))
    scores = cpu.read_scores({name: path})
    probe = cpu.probe_variant(name, path, 1, None)
    assert _ran(hostile_cwd) == ""
    assert scores and scores[0].name == name
    assert probe.runs is not None or "the child could not start" not in probe.detail


@pytest.mark.slow  # seconds: measured in the fast lane (CONTRIBUTING.md)
def test_a_bench_child_is_isolated(hostile_cwd: Path, smollm_path: Path) -> None:
    out = bench_llama.measure_load(smollm_path, 256, 1, child_env(), gpu_layers=0)
    assert _ran(hostile_cwd) == ""
    assert out


@pytest.mark.slow  # starts a process
def test_the_frozen_entry_accepts_isolation_flags(tmp_path: Path) -> None:
    """packaging/ember_main.py answers `[-I|-P …] -c CODE ARGS` as Python does (frozen app only)."""
    code = (
        "import runpy, sys\nsys.frozen = True\nsys.argv = [sys.argv[0], '-I', '-P', '-c', "
        "'import sys; print(\"child\", sys.argv[1:])', 'a b', 'c']\n"
        f"runpy.run_path({str(ROOT / 'packaging' / 'ember_main.py')!r}, run_name='__main__')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "child ['a b', 'c']"


@pytest.mark.slow  # starts a process or uses the real model (tests/slow_marks.py)
def test_a_start_up_bench_child_is_isolated(hostile_cwd: Path) -> None:
    from tests.bench import cli_startup as bench_startup

    took = bench_startup._process_ms(bench_startup.ENTRY, "--version")  # pyright: ignore[reportPrivateUsage]
    assert _ran(hostile_cwd) == ""
    assert took > 0


@pytest.mark.slow  # starts a process
def test_every_child_is_built_the_same_way(hostile_cwd: Path) -> None:
    """The one builder every child uses: its imports come from Ember, in a folder not the user's."""
    from engine.child_env import python_child

    child = python_child("import json, os, struct, engine.child_env as e; print(os.getcwd() == str(e.ROOT))")
    done = subprocess.run(
        child.argv, env=child.env, cwd=child.cwd, capture_output=True, text=True, timeout=60, check=False
    )
    assert _ran(hostile_cwd) == ""
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr
