"""The asyncio face of the engine: a worker thread owns the backend; the loop never blocks."""

from __future__ import annotations

import asyncio
import threading

import pytest

from engine.backends.base import Backend, make_request
from engine.backends.scripted import ScriptedBackend
from engine.errors import ModelLoadError
from engine.events import ContentDelta, Event, StructuredValue, TurnDone
from engine.runtime import Engine

USER = [{"role": "user", "content": "hi"}]


async def _collect(engine: Engine) -> list[Event]:
    return [e async for e in engine.run_turn(make_request(USER))]


def test_chat_streams_events_from_the_worker_thread() -> None:
    async def main() -> list[Event]:
        engine = Engine(ScriptedBackend.from_texts(["a", "b"]))
        try:
            return await _collect(engine)
        finally:
            await engine.aclose()

    events = asyncio.run(main())
    assert [e.text for e in events if isinstance(e, ContentDelta)] == ["a", "b"]
    assert isinstance(events[-1], TurnDone)


def test_the_loop_keeps_running_while_a_reply_streams() -> None:
    slow = ScriptedBackend([[{"text": f"t{i}", "delay_ms": 10} for i in range(20)]])

    async def main() -> tuple[int, list[Event]]:
        engine = Engine(slow)
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.005)
                ticks += 1

        task = asyncio.create_task(ticker())
        events = await _collect(engine)
        task.cancel()
        await engine.aclose()
        return ticks, events

    ticks, events = asyncio.run(main())
    assert ticks >= 10  # the loop ran all along (20 tokens x 10 ms)
    assert isinstance(events[-1], TurnDone)


def test_stop_ends_the_reply_and_keeps_the_partial() -> None:
    async def main() -> list[Event]:
        engine = Engine(ScriptedBackend([[{"text": f"t{i} ", "delay_ms": 5} for i in range(200)]]))
        events: list[Event] = []
        async for event in engine.run_turn(make_request(USER)):
            events.append(event)
            if len(events) == 3:
                engine.stop()
        await engine.aclose()
        return events

    events = asyncio.run(main())
    done = events[-1]
    assert isinstance(done, TurnDone) and done.stats.finish_reason == "cancelled"
    assert 3 <= sum(isinstance(e, ContentDelta) for e in events) <= 4


def test_leaving_the_loop_early_stops_the_worker() -> None:
    backend = ScriptedBackend([[{"text": "x", "delay_ms": 5} for _ in range(1000)], ["next"]])

    async def main() -> list[Event]:
        engine = Engine(backend)
        gen = engine.run_turn(make_request(USER))
        async for _ in gen:
            break
        await gen.aclose()
        second = await _collect(engine)  # the worker is free again
        await engine.aclose()
        return second

    second = asyncio.run(main())
    assert [e.text for e in second if isinstance(e, ContentDelta)] == ["next"]


def test_load_runs_on_the_loader_and_a_failure_keeps_the_old_backend() -> None:
    threads: list[str] = []

    def good() -> Backend:
        threads.append(threading.current_thread().name)
        return ScriptedBackend.from_texts("from new")

    def bad() -> Backend:
        raise ModelLoadError("broken.gguf: not a GGUF model file")

    async def main() -> list[Event]:
        engine = Engine()
        await engine.load(good)
        with pytest.raises(ModelLoadError, match=r"broken\.gguf"):
            await engine.load(bad)
        events = await _collect(engine)
        await engine.aclose()
        return events

    events = asyncio.run(main())
    assert threads and threads[0].startswith("ember-loader")
    assert [e.text for e in events if isinstance(e, ContentDelta)] == ["from new"]


def test_the_current_model_keeps_answering_while_another_loads() -> None:
    old = ScriptedBackend([[{"text": f"t{i} ", "delay_ms": 10} for i in range(30)]])
    loaded = threading.Event()

    def slow_factory() -> Backend:
        loaded.wait(5)  # released only once the old model is mid-reply
        return ScriptedBackend.from_texts("from the new model")

    async def main() -> tuple[list[Event], bool, list[Event]]:
        engine = Engine(old)
        load = asyncio.ensure_future(engine.load(slow_factory))
        events: list[Event] = []
        load_done_mid_reply = False
        async for event in engine.run_turn(make_request(USER)):
            events.append(event)
            if len(events) == 3:
                loaded.set()
            if len(events) == 20:
                await asyncio.sleep(0.05)
                load_done_mid_reply = load.done()
        await load
        after = await _collect(engine)
        await engine.aclose()
        return events, load_done_mid_reply, after

    events, load_done_mid_reply, after = asyncio.run(main())
    assert load_done_mid_reply  # the load did not wait for the reply to end
    assert sum(isinstance(e, ContentDelta) for e in events) == 30 and isinstance(events[-1], TurnDone)
    assert [e.text for e in after if isinstance(e, ContentDelta)] == ["from the new model"]


def test_a_structured_turn_is_a_turn_like_any_other() -> None:
    async def main() -> tuple[list[bool], list[Event]]:
        engine = Engine(ScriptedBackend.from_texts([{"text": "{}", "delay_ms": 20}]))
        busy, events = [], []
        async for event in engine.run_turn(make_request(USER, schema={"type": "object"})):
            busy.append(engine.busy)
            events.append(event)
        busy.append(engine.busy)
        await engine.aclose()
        return busy, events

    busy, events = asyncio.run(main())
    assert busy == [True, True, False] and events[0] == StructuredValue({})
