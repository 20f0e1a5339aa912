"""What the wheel would contain: the product, and no developer instruments (issue #36).

The wheel is built by hatchling from `[tool.hatch.build.targets.wheel]`; building it here would
need hatchling (a download on a fresh machine), so the test reads the same config and lists the
files it selects: every file under each listed package (hatchling leaves out only what git
ignores, so this list is, if anything, larger). On 2026-12-04 `uv build --wheel` gave exactly
this list (305 files, plus its .dist-info).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INSTRUMENTS = re.compile(r"(^|/)(bench_\w+|\w*screenshots?|\w*stall\w*|\w*scale_bench|startup_probe|native)\.py$")


def _wheel_config() -> dict[str, object]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return data["tool"]["hatch"]["build"]["targets"]["wheel"]


def wheel_files() -> list[str]:
    """The wheel's files, as paths inside it (hatchling's `packages`: each folder as it is)."""
    packages = _wheel_config()["packages"]
    assert isinstance(packages, list)
    return sorted(
        p.relative_to(ROOT).as_posix()
        for package in packages
        for p in (ROOT / str(package)).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )


def test_the_wheel_takes_only_the_three_packages() -> None:
    config = _wheel_config()
    assert config["packages"] == ["desktop", "engine", "models"]
    assert set(config) == {"packages"}  # no include, force-include, sources or shared-data to add more


def test_the_wheel_carries_no_bench_comparisons_screenshots_stall_or_scale_scripts() -> None:
    files = wheel_files()
    assert "engine/bench/quick.py" in files and "desktop/qt/app.py" in files  # the product is there
    assert not [f for f in files if f.startswith("tests/")]
    assert [f for f in files if INSTRUMENTS.search(f)] == []
    assert [f for f in files if f.startswith("engine/bench/")] == ["engine/bench/__init__.py", "engine/bench/quick.py"]


def test_the_instruments_pattern_would_catch_them() -> None:
    """The check above is not vacuous: each instrument that moved out matches it."""
    moved = ["tests/tools/screenshots.py", "tests/tools/stall_bench.py", "tests/tools/scale_bench.py",
             "tests/tools/startup_probe.py", "tests/bench/native.py", "desktop/cli/bench_serve.py"]  # fmt: skip
    assert all(INSTRUMENTS.search(f) for f in moved)
    assert all((ROOT / f).is_file() for f in moved[:5])
