"""engine/ and models/ must never import Qt: checked in a fresh interpreter."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _modules(package: str) -> list[str]:
    return [f"{package}.{m.name}" for m in pkgutil.iter_modules([str(ROOT / package)])]


def _import_in_fresh_python(modules: list[str]) -> subprocess.CompletedProcess[str]:
    """Import `modules` in a new interpreter; it fails if any of them pulled Qt in."""
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('PySide6', 'qasync', 'shiboken6'))\n"
        "assert not bad, bad\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)


def test_engine_and_models_never_import_qt() -> None:
    result = _import_in_fresh_python(_modules("engine") + _modules("models"))
    assert result.returncode == 0, result.stderr


def test_the_desktop_glue_stays_qt_free() -> None:
    # The controller and its helpers hold the logic; only the widgets may import Qt.
    result = _import_in_fresh_python(["desktop.controller", "desktop.history_session", "desktop.reply_format",
                                      "desktop.core.settings_resolver", "desktop.cli_common", "desktop.titling",
                                      "desktop.cli"])
    assert result.returncode == 0, result.stderr


def test_the_check_would_catch_qt() -> None:
    # The same check, run over a module that does import Qt, must fail: the test is honest.
    code = "import sys, desktop.window\nassert not any(m.startswith('PySide6') for m in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode != 0
