"""Shared fixtures: every test gets its own EMBER_HOME and an offscreen Qt platform."""

from __future__ import annotations

import atexit
import contextlib
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

    from engine.llama.process_state import LlamaProcess

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
# The default embedder is converted once per run (about a second), not once per EMBER_HOME
# (written beside and renamed, so two xdist workers converting at once is harmless).
os.environ.setdefault("EMBER_DEFAULT_EMBEDDER", os.path.join(os.environ["EMBER_CACHE_DIR"], "default-embedder.gguf"))


def _own_cache_per_worker() -> None:
    """Under pytest-xdist each worker gets its own cache folder inside the run's: the machine
    profile that `ember bench` saves there (and that `no_machine_profile` removes before each
    test) would otherwise come and go under another worker's test. The verdicts the controller
    probed before the workers started (the CPU variant, the GPUs) are copied in, not probed again."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return
    run = Path(os.environ["EMBER_CACHE_DIR"])
    own = run / worker
    own.mkdir(exist_ok=True)
    for verdict in run.glob("*.json"):
        if verdict.name != "machine-profile.json":
            shutil.copy2(verdict, own / verdict.name)
    os.environ["EMBER_CACHE_DIR"] = str(own)


_own_cache_per_worker()


def pytest_configure(config: pytest.Config) -> None:
    """`pytest -m vulkan`: llama.cpp's Vulkan backend on Mesa's lavapipe for the whole run (the GPU
    pick is made once per process, before a test loads a model; tests/test_vulkan.py)."""
    if "vulkan" in (config.option.markexpr or ""):
        from glob import glob

        os.environ.setdefault("EMBER_GPU_DEVICE", "llvmpipe")
        icd = sorted(glob("/usr/share/vulkan/icd.d/lvp_icd*.json"))
        if icd:
            os.environ.setdefault("VK_ICD_FILENAMES", icd[0])


# `-n auto` (pyproject's addopts) starts no workers for a selection of fewer test files than this:
# each worker imports and collects on its own (seconds), more than a few files' tests take.
SERIAL_BELOW_FILES = 4


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """No workers for a few named files or tests (`pytest tests/test_x.py`); otherwise one more
    than the CPUs (or PYTEST_XDIST_AUTO_NUM_WORKERS). `-n N` on the command line still wins."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    if config.args_source is pytest.Config.ArgsSource.ARGS and (
        _test_files(config.invocation_params.dir, config.args) < SERIAL_BELOW_FILES
    ):
        return 0
    # One worker more than CPUs: a quarter of the suite's wall time is spent waiting (child
    # processes, servers, timers), so one worker per CPU left the cores idle that long (the whole
    # suite on 2 cores: 11 min 23 s of CPU in 7 min 23 s).
    return (os.cpu_count() or 1) + 1


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow tests first (in their files' order): the longest ones start while there is other
    work to share the cores with, instead of one of them running alone at the end of the run."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def _test_files(cwd: Path, args: list[str]) -> int:
    count = 0
    for arg in args:
        path = cwd / arg.split("::")[0]
        if path.is_dir():
            count += sum(1 for _ in path.rglob("test_*.py"))
        else:
            count += 1
    return count


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Under xdist the controller runs the once-per-run CPU-variant probe (child processes) before
    its workers start, and each worker copies the verdict (`_own_cache_per_worker`) instead of
    probing again."""
    config = session.config
    if getattr(config.option, "dist", "no") != "no" and not hasattr(config, "workerinput"):
        from engine.llama.cpu import ensure_backends  # outside: a rename must fail loudly

        with contextlib.suppress(Exception):  # a build where it fails: the tests say so themselves
            ensure_backends()


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


@pytest.fixture
def fresh_llama() -> Iterator[LlamaProcess]:
    """llama.cpp's process-wide state as a new process has it, for a test that fakes llama.cpp;
    the real one (a variant and GPU an earlier test loaded) comes back after it."""
    from engine.llama.process_state import PROCESS

    real = PROCESS.reset()
    yield PROCESS
    PROCESS.restore(real)


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
