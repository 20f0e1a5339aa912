"""The layers hold: import-linter's contracts (pyproject.toml) pass, and they do catch a violation."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = [sys.executable, "-c",
        "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"]



def _lint(cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"}
    return subprocess.run([*LINT, "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=240, env=env)


def test_the_import_contracts_are_kept() -> None:
    done = _lint(ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


@pytest.mark.parametrize(("module", "line", "contract"), [
    ("engine/reply/pipeline.py", "import PySide6.QtCore", "engine and models never import Qt"),
    ("models/gguf/header.py", "import engine.events", "imports only go downwards"),
    ("desktop/core/model_rows.py", "import desktop.qt.window", "the desktop core"),
    ("desktop/cli/cmd_tools.py", "import PySide6.QtWidgets", "the command line never imports Qt"),
    ("engine/history/recorder.py", "import engine.turns.structured", "engine: sessions"),
    ("engine/tools/registry.py", "import engine.runtime", "engine: sessions"),
    ("desktop/serve/wire.py", "import PySide6.QtCore", "the API server"),
    ("desktop/serve/app.py", "import desktop.cli.common", "imports only go downwards"),
])
def test_a_planted_violation_breaks_a_contract(tmp_path: Path, module: str, line: str, contract: str) -> None:
    for name in ("desktop", "engine", "models"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / module
    target.write_text(target.read_text(encoding="utf-8") + f"\n{line}  # planted\n", encoding="utf-8")
    done = _lint(tmp_path)
    assert done.returncode != 0
    broken = done.stdout[done.stdout.index("Broken contracts"):]
    assert contract in broken and module.removesuffix(".py").replace("/", ".") in broken
