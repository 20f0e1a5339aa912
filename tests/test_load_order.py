"""llama.cpp's libraries load before numpy in every process that may load a model (issue #15).

On some machines numpy imported first makes a GPU model load segfault; each entry point is
checked in a fresh interpreter, with no Qt involved.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

CHECK = (
    "import sys\n"
    "names = list(sys.modules)\n"
    "assert 'llama_cpp.llama_cpp' in names, 'llama.cpp was not loaded'\n"
    "assert 'numpy' not in names or names.index('llama_cpp.llama_cpp') < names.index('numpy'), 'numpy came first'\n"
    "assert not any(m.split('.')[0] in ('PySide6', 'shiboken6') for m in names), 'Qt was imported'\n"
)


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code + CHECK], capture_output=True, text=True, cwd=ROOT, timeout=120, check=False
    )


@pytest.mark.slow  # starts a process
@pytest.mark.parametrize(
    ("entry", "code"),
    [
        (
            "ember chat (the CLI on a llama backend)",
            "import desktop.cli.main\nargs = desktop.cli.main.parse_args(['chat', 'hi'])\n"
            "from engine.api.factory import make_backend, parse_backend_spec\n"
            "import engine.llama.llama\n",
        ),
        (  # the quick bench imports llama.cpp when it loads the model, after its prediction
            "ember bench",
            "import desktop.cli.cmd_bench\nimport engine.api.machine\nimport engine.llama.llama\n",
        ),
        ("ember models optimize (the quality comparison)", "import engine.rewrite.fast_copy\n"),
        ("the bench's load probe", "import tests.bench.llama\n"),
        ("the engine's backend", "import engine.llama.llama\n"),
        (
            "documents with vectors (an embedder, or a search given a query vector)",
            "from engine.docs.index import DocIndex\nfrom engine.docs.embed import LlamaEmbedder\n"
            "import engine.docs.vectors\n",
        ),
        (
            "the window's model load (no Qt: the factory the model thread runs)",
            "from desktop.core.model_choice import choose_model\nimport engine.llama.llama\n",
        ),
    ],
)
def test_llama_cpp_loads_before_numpy(entry: str, code: str) -> None:
    result = _run(code)
    assert result.returncode == 0, f"{entry}: {result.stderr.strip().splitlines()[-1:]}"


@pytest.mark.slow  # starts a process
def test_nothing_in_ember_imports_numpy_but_llama_cpp() -> None:
    # Start-up is lazy (llama.cpp loads with the model, tests/test_lazy_start.py), so the order
    # holds only if no Ember module brings numpy in by another road. Every module is imported
    # with llama.cpp blocked: one that needs it fails to import (fine), numpy must never appear.
    code = (
        "import importlib, pkgutil, sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'llama_cpp':\n"
        "            raise ImportError('llama.cpp blocked')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import desktop, engine, models\n"
        "for pkg in (models, engine, desktop):\n"
        "    for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.', onerror=lambda name: None):\n"
        "        if info.name.startswith('desktop.qt') or info.name.endswith('__main__'):\n"
        "            continue\n"
        "        try:\n"
        "            importlib.import_module(info.name)\n"
        "        except ImportError as exc:\n"
        "            if 'blocked' not in str(exc):\n"
        "                raise\n"
        "        assert 'numpy' not in sys.modules, f'{info.name} imported numpy'\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr.strip().splitlines()[-1:]


@pytest.mark.slow  # starts a process
def test_reading_a_gguf_header_needs_no_numpy(smollm_path: Path) -> None:
    code = (
        "import sys\nfrom pathlib import Path\nfrom models.gguf.meta import read_metadata\n"
        f"meta = read_metadata(Path({str(smollm_path)!r}))\n"
        "assert meta.quantization == 'Q4_1', meta.quantization\n"
        "assert 'numpy' not in sys.modules and 'gguf' not in sys.modules\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr


def test_this_test_session_loaded_llama_cpp_first() -> None:
    # tests/conftest.py imports it before any test module can import numpy (gguf_factory does).
    from engine.llama.llama_first import loaded_before_numpy

    assert loaded_before_numpy()


@pytest.mark.slow  # starts a process
def test_the_check_would_catch_numpy_first() -> None:
    result = _run("import numpy\nimport llama_cpp\n")
    assert result.returncode != 0 and "numpy came first" in result.stderr
