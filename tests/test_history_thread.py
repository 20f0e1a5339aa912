"""The session's history thread never frees what a job holds: the loop's thread does."""

from __future__ import annotations

import asyncio
import threading

from engine.session.history_thread import HistoryThread


class _Witness:
    """Records the thread it is freed on (as a Qt object's destructor would care)."""

    def __init__(self, freed_on: list[str]) -> None:
        self.freed_on = freed_on

    def __del__(self) -> None:
        self.freed_on.append(threading.current_thread().name)

    def where(self) -> str:
        return threading.current_thread().name


def test_what_a_job_holds_is_freed_on_the_loops_thread() -> None:
    freed_on: list[str] = []
    thread = HistoryThread()

    async def main() -> str:
        result = await thread.call(_Witness(freed_on).where)  # the job is the witness's only holder
        thread.submit(_Witness(freed_on).where)  # fire and forget: nothing here keeps it
        for _ in range(50):  # let the worker finish and the loop run what it handed back
            await asyncio.sleep(0.01)
            if len(freed_on) == 2:
                break
        return result

    try:
        worker = asyncio.run(main())
    finally:
        thread.close()
    assert worker.startswith("ember-history")
    assert freed_on == [threading.current_thread().name] * 2
