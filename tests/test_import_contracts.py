"""The layers hold: import-linter's contracts (pyproject.toml) pass, and they do catch a violation."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = [str(Path(sys.executable).with_name("lint-imports"))]


def _lint(cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"}
    return subprocess.run([*LINT, "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=240, env=env)


@pytest.mark.slow  # starts a process
def test_the_import_contracts_are_kept() -> None:
    done = _lint(ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


@pytest.mark.slow  # starts a process
@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        ("engine/reply/pipeline.py", "import PySide6.QtCore", "engine and models never import Qt"),
        ("models/gguf/header.py", "import engine.events", "imports only go downwards"),
        ("desktop/core/model_rows.py", "import desktop.qt.window", "the desktop core"),
        ("desktop/cli/cmd_tools.py", "import PySide6.QtWidgets", "the command line never imports Qt"),
        ("engine/history/recorder.py", "import engine.turns.structured", "engine: api -> sessions"),
        ("engine/tools/registry.py", "import engine.runtime", "engine: api -> sessions"),
        ("desktop/serve/wire.py", "import PySide6.QtCore", "the API server"),
        ("desktop/serve/app.py", "import desktop.cli.common", "imports only go downwards"),
    ],
)
def test_a_planted_violation_breaks_a_contract(tmp_path: Path, module: str, line: str, contract: str) -> None:
    done = _lint_planted(tmp_path, [(module, line)])
    assert done.returncode != 0
    broken = done.stdout[done.stdout.index("Broken contracts") :]
    assert contract in broken and module.removesuffix(".py").replace("/", ".") in broken


# Each of these packages was once missing from the engine's layers contract, so a cycle through it
# went unseen ("7 kept, 0 broken"). Each plant below closes a package cycle through one of them.
@pytest.mark.slow  # starts a process
@pytest.mark.parametrize(
    "plants",
    [
        [("engine/backends/base.py", "import engine.docs.index")],
        [("engine/network/guard.py", "import engine.backends.base")],
        [("engine/child_env.py", "import engine.llama.llama")],
        [("engine/history/store.py", "import engine.logsetup"), ("engine/logsetup.py", "import engine.history.store")],
        [("engine/backends/base.py", "import engine.llama.llama")],
        [("engine/llama/cpu.py", "import engine.rewrite.requantize")],
    ],
    ids=["docs", "network", "child_env", "logsetup", "llama", "rewrite"],
)
def test_a_planted_cycle_through_any_engine_package_breaks_the_layers(
    tmp_path: Path, plants: list[tuple[str, str]]
) -> None:
    done = _lint_planted(tmp_path, plants)
    assert done.returncode != 0
    assert "engine: api -> sessions" in done.stdout[done.stdout.index("Broken contracts") :]


# The holes code-review-3 §3 found ("7 kept, 0 broken" with each of these planted), and an
# import of an engine internal or of `models` from a front end (the last contract: only engine.api).
@pytest.mark.slow  # starts a process
@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        ("engine/llama/llama_decode.py", "import engine.llama.llama", "no module cycles between siblings"),
        ("engine/history/types.py", "import engine.history.store", "no module cycles between siblings"),
        ("models/gguf/header.py", "import models.gguf.meta", "no module cycles between siblings"),
        ("desktop/qt/look/theme.py", "import desktop.qt.window", "the window's rooms"),
        ("desktop/qt/chat/composer.py", "import desktop.qt.frame.header", "the window's rooms"),
        ("desktop/qt/frame/header.py", "import desktop.cli.common", "the window never imports the command line"),
        ("desktop/qt/frame/header.py", "import engine.llama.llama_log", "the front ends reach the engine through"),
        ("desktop/cli/cmd_doctor.py", "from engine.history import store", "the front ends reach the engine through"),
        ("desktop/serve/app.py", "from engine.session import session", "the front ends reach the engine through"),
        ("desktop/core/model_rows.py", "import models.library.scan", "the front ends reach the engine through"),
        ("desktop/cli/cmd_chat.py", "from engine import events", "the front ends reach the engine through"),
    ],
)
def test_a_planted_hole_of_the_review_fails(tmp_path: Path, module: str, line: str, contract: str) -> None:
    done = _lint_planted(tmp_path, [(module, line)])
    assert done.returncode != 0
    assert contract in done.stdout[done.stdout.index("Broken contracts") :]


def test_the_front_door_has_no_exceptions_left() -> None:
    """Issue #47 ends the ratchet: every import of the engine by a front end goes through engine.api."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    door = next(c for c in contracts if c["name"] == "the front ends reach the engine through engine.api")
    assert door["ignore_imports"] == []


@pytest.mark.slow  # starts a process
def test_the_front_doors_ignore_list_only_shrinks(tmp_path: Path) -> None:
    """An ignored import the code no longer makes fails the check: the list cannot keep stale holes."""
    _lint_planted(tmp_path, [])
    config = tmp_path / "pyproject.toml"
    text = config.read_text(encoding="utf-8")
    assert text.count("ignore_imports = [\n") == 1  # the front door's list, one entry a line
    config.write_text(
        text.replace(
            "ignore_imports = [\n", 'ignore_imports = [\n    "desktop.cli.cmd_doctor -> engine.history.store",\n'
        )
    )
    done = _lint(tmp_path)
    assert done.returncode != 0
    assert "desktop.cli.cmd_doctor -> engine.history.store" in " ".join(done.stdout.split())


@pytest.mark.slow  # starts a process
def test_the_server_is_a_sibling_of_the_core_not_above_it(tmp_path: Path) -> None:
    done = _lint_planted(tmp_path, [("desktop/serve/app.py", "import desktop.core.citations")])
    assert done.returncode != 0
    assert "desktop.serve.app -> desktop.core.citations" in done.stdout


def _lint_planted(tmp_path: Path, plants: list[tuple[str, str]]) -> subprocess.CompletedProcess[str]:
    for name in ("desktop", "engine", "models"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    for module, line in plants:
        target = tmp_path / module
        target.write_text(target.read_text(encoding="utf-8") + f"\n{line}  # planted\n", encoding="utf-8")
    return _lint(tmp_path)
