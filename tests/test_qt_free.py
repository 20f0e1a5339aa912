"""engine/ and models/ must never import Qt: checked in a fresh interpreter."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _modules(package: str) -> list[str]:
    return [f"{package}.{m.name}" for m in pkgutil.iter_modules([str(ROOT / package)])]


def test_engine_and_models_never_import_qt() -> None:
    modules = _modules("engine") + _modules("models")
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('PySide6', 'qasync', 'shiboken6'))\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr


def test_the_check_would_catch_qt() -> None:
    # The same check, run over a module that does import Qt, must fail: the test is honest.
    code = "import sys, desktop.window\nassert not any(m.startswith('PySide6') for m in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode != 0
