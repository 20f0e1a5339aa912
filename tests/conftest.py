"""Shared fixtures: every test gets its own EMBER_HOME and an offscreen Qt platform."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import engine.llama.llama_first  # noqa: F401  # pyright: ignore[reportUnusedImport]  (llama.cpp before numpy)

if TYPE_CHECKING:
    from serve_helpers import SeeingEcho, Served
    from sse_stub import StubServer

# A test that is slow but not marked `slow` fails under --check-slow-marks (.ci/run sets it).
pytest_plugins = ("slow_marks", "pytester")

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# A test run started in the background (`cmd &`, nohup) inherits SIGINT ignored, and so would
# the `ember` processes the Ctrl+C tests start (an ignored signal stays ignored across exec);
# those tests are about a terminal's Ctrl+C, so the run takes SIGINT back.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# Machine-level verdicts (the llama.cpp CPU probe) go to one folder per test run, which child
# processes inherit, never to the user's cache.
if "EMBER_CACHE_DIR" not in os.environ:
    os.environ["EMBER_CACHE_DIR"] = tempfile.mkdtemp(prefix="ember-test-cache-")
    atexit.register(shutil.rmtree, os.environ["EMBER_CACHE_DIR"], True)
# The default embedder is converted once per run (about a second), not once per EMBER_HOME.
os.environ.setdefault("EMBER_DEFAULT_EMBEDDER", os.path.join(os.environ["EMBER_CACHE_DIR"], "default-embedder.gguf"))


def pytest_configure(config: pytest.Config) -> None:
    """`pytest -m vulkan`: llama.cpp's Vulkan backend on Mesa's lavapipe for the whole run (the GPU
    pick is made once per process, before a test loads a model; tests/test_vulkan.py)."""
    if "vulkan" in (config.option.markexpr or ""):
        from glob import glob

        os.environ.setdefault("EMBER_GPU_DEVICE", "llvmpipe")
        icd = sorted(glob("/usr/share/vulkan/icd.d/lvp_icd*.json"))
        if icd:
            os.environ.setdefault("VK_ICD_FILENAMES", icd[0])


@pytest.fixture(autouse=True)
def ember_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "ember-home"
    monkeypatch.setenv("EMBER_HOME", str(home))
    return home


@pytest.fixture(autouse=True)
def no_machine_profile() -> None:
    """Each test starts with no machine profile cached: `ember bench` saves the one it measures in
    the run's shared cache folder, and a later test's speed ranking must not depend on test order."""
    Path(os.environ["EMBER_CACHE_DIR"], "machine-profile.json").unlink(missing_ok=True)


@pytest.fixture(scope="session")
def smollm_path() -> Path:
    from models.library.default_model import default_model_path

    return default_model_path()


@pytest.fixture(scope="session")
def smollm(smollm_path: Path):  # type: ignore[no-untyped-def]
    """One real SmolLM2 backend shared by the session (loading takes about a second)."""
    from engine.llama.llama import LlamaBackend

    backend = LlamaBackend(smollm_path, n_ctx=2048)
    yield backend
    backend.close()


@pytest.fixture
def stubs() -> Iterator[list[StubServer]]:
    """Start SSE stub servers with `stubs.append(StubServer(...).start())`; all are stopped afterwards."""
    started: list[StubServer] = []
    yield started
    for stub in started:
        stub.stop()


@pytest.fixture
def served() -> Iterator[list[Served]]:
    """Start local API servers with `served.append(serve(...))`; all are closed afterwards."""
    started: list[Served] = []
    yield started
    for s in started:
        s.close()


@pytest.fixture
def seeing() -> Iterator[tuple[Served, SeeingEcho]]:
    """A local API server over an echo backend that can see, and that backend."""
    from serve_helpers import SeeingEcho, serve

    backend = SeeingEcho()
    s = serve(backend)
    yield s, backend
    s.close()


@pytest.fixture(scope="session")
def gemma_path() -> Path:
    """Gemma 3 270M Q4_K_M, a base model without a chat template (tests/real_models.py)."""
    from real_models import gemma_file

    return gemma_file()
