"""The one cancellation token (engine/cancel.py): one `Cancelled` where work stops, sleeps that wake at once."""

from __future__ import annotations

import threading
import time

import pytest

from engine.cancel import CancelToken
from engine.errors import Cancelled


def test_check_raises_the_one_cancelled_only_once_cancelled() -> None:
    token = CancelToken()
    token.check()  # not cancelled: nothing
    token.cancel()
    with pytest.raises(Cancelled):
        token.check()


def test_a_wait_wakes_at_the_cancel_not_at_its_timeout() -> None:
    token = CancelToken()
    assert not token.wait(0.01)
    threading.Timer(0.05, token.cancel).start()
    started = time.monotonic()
    assert token.wait(30)
    assert time.monotonic() - started < 10  # against a hang only: the cancel came at 0.05 s


def test_a_callback_runs_once_and_a_failing_one_does_not_stop_the_rest() -> None:
    token, ran = CancelToken(), list[str]()

    def boom() -> None:
        raise RuntimeError("unblock failed")

    token.on_cancel(boom)
    token.on_cancel(lambda: ran.append("first"))
    forget = token.on_cancel(lambda: ran.append("forgotten"))
    forget()
    token.cancel()
    token.cancel()
    token.on_cancel(lambda: ran.append("late"))  # already cancelled: at once
    assert ran == ["first", "late"] and token.cancelled
