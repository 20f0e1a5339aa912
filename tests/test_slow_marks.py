"""The check that keeps the fast lane fast (tests/slow_marks.py, issue #53): a test that starts a
process or burns CPU without the `slow` mark fails under --check-slow-marks, and only then."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

TESTS = """
import subprocess, sys, time
import pytest

def test_starts_a_process():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

@pytest.mark.slow
def test_marked():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

def test_burns_cpu():
    import slow_marks
    end = time.process_time() + slow_marks.cpu_limit() + 0.2
    while time.process_time() < end:
        pass

def test_quick():
    assert sum(range(1000)) == 499500
"""


@pytest.mark.slow
def test_unmarked_slow_tests_fail_only_when_the_check_is_on(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EMBER_CHECK_SLOW_MARKS", raising=False)  # .ci/run turns it on for the suite
    pytester.makepyfile(test_sample=TESTS)
    pytester.makeini("[pytest]\nmarkers =\n    slow: slow\n")
    checked = pytester.runpytest_inprocess("-p", "slow_marks", "--check-slow-marks", "-p", "no:cacheprovider")
    checked.assert_outcomes(passed=4, errors=2)
    checked.stdout.fnmatch_lines(
        [
            "*unmarked slow test (started a process: subprocess.Popen*): mark it @pytest.mark.slow*",
            "*unmarked slow test (*s of CPU, limit *): mark it @pytest.mark.slow*",
        ],
        consecutive=False,
    )
    assert "test_marked" not in "".join(line for line in checked.outlines if "unmarked" in line)
    pytester.runpytest_inprocess("-p", "slow_marks", "-p", "no:cacheprovider").assert_outcomes(passed=4)


LEFTOVER = """
import threading, time
import slow_marks

done = threading.Event()

def test_leaves_a_busy_thread():
    def spin():
        end = time.thread_time() + slow_marks.cpu_limit() + 0.5
        while time.thread_time() < end:
            pass
        done.set()
    threading.Thread(target=spin, daemon=True).start()

def test_waits_while_it_runs():
    assert done.wait(60)  # the thread's CPU is spent during this test, which only waits
"""


@pytest.mark.slow  # burns 2 CPU s on purpose
def test_a_thread_an_earlier_test_left_running_is_not_charged_to_the_next(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A clean-clone CI run failed `test_safe_text_leaves_no_control_characters` (0.08 s alone)
    # as "3.5 s of CPU": the process's CPU counted what another test's threads did meanwhile.
    monkeypatch.delenv("EMBER_CHECK_SLOW_MARKS", raising=False)
    pytester.makepyfile(test_leftover=LEFTOVER)
    pytester.makeini("[pytest]\nmarkers =\n    slow: slow\n")
    args = ("-p", "slow_marks", "--check-slow-marks", "-p", "no:cacheprovider", "-p", "no:randomly")
    pytester.runpytest_inprocess(*args).assert_outcomes(passed=2)


@pytest.mark.slow
@pytest.mark.timeout(600)  # three pytest processes: minutes on a loaded machine, a hang guard only
def test_the_check_holds_in_xdist_workers(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """`uv run pytest` runs in pytest-xdist workers (-n auto): each worker checks its own tests,
    and the failure reaches the controller's summary."""
    monkeypatch.delenv("EMBER_CHECK_SLOW_MARKS", raising=False)
    here = str(Path(__file__).resolve().parent)  # the workers import slow_marks from here
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p))
    pytester.makepyfile(test_sample=TESTS)
    pytester.makeini("[pytest]\nmarkers =\n    slow: slow\n")
    args = ("-p", "slow_marks", "--check-slow-marks", "-n", "2", "-p", "no:cacheprovider")
    checked = pytester.runpytest_subprocess(*args)
    checked.assert_outcomes(passed=4, errors=2)
    checked.stdout.fnmatch_lines(["*created: 2/2 workers*"])
    for line in (  # in either order: the workers report as they finish
        "*unmarked slow test (started a process: subprocess.Popen*): mark it @pytest.mark.slow*",
        "*unmarked slow test (*s of CPU, limit *): mark it @pytest.mark.slow*",
    ):
        checked.stdout.fnmatch_lines([line])
