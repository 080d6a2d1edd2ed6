"""Awaitables run side by side: all their results, or the first failure with the rest stopped."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from cari.concurrency import all_or_none, beside


def test_the_results_in_order() -> None:
    async def value(v: int) -> int:
        await asyncio.sleep(0)
        return v

    assert asyncio.run(all_or_none(value(1), value(2), value(3))) == [1, 2, 3]


def test_a_failure_cancels_the_others_before_it_propagates() -> None:
    """One part fails while another waits on what never comes (a statement, an embedding):
    the waiting one is cancelled, not left running, by the time the error reaches the caller."""
    stopped: list[str] = []

    async def run() -> None:
        waiting = asyncio.Event()

        async def waits() -> int:
            waiting.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                stopped.append("cancelled")
                raise
            return 0

        async def fails() -> int:
            await waiting.wait()
            raise ValueError("the keyword statement failed")

        with pytest.raises(ValueError, match="keyword statement failed"):
            await all_or_none(waits(), fails())
        assert stopped == ["cancelled"]
        assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []

    asyncio.run(run())


def test_cancelling_the_caller_cancels_every_part() -> None:
    stopped: list[int] = []

    async def run() -> None:
        started = asyncio.Event()

        async def waits(n: int) -> int:
            started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                stopped.append(n)
                raise
            return n

        caller = asyncio.ensure_future(all_or_none(waits(1), waits(2)))
        await started.wait()
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        assert sorted(stopped) == [1, 2]

    asyncio.run(run())


def test_beside_gives_the_result_and_stops_the_watcher() -> None:
    stopped: list[str] = []

    async def watch(_scope: anyio.CancelScope) -> None:
        try:
            await anyio.sleep_forever()
        finally:
            stopped.append("watcher")

    async def work() -> int:
        await anyio.sleep(0)
        return 7

    assert anyio.run(beside, work(), watch) == 7
    assert stopped == ["watcher"]


def test_beside_raises_the_works_error_itself() -> None:
    """Not in an ExceptionGroup: callers map the error itself (a CariError) to its message."""

    async def watch(_scope: anyio.CancelScope) -> None:
        await anyio.sleep_forever()

    async def work() -> int:
        raise LookupError("the collection does not exist")

    with pytest.raises(LookupError, match="does not exist"):
        anyio.run(beside, work(), watch)


def test_a_watcher_that_cancels_stops_the_work_but_its_shielded_part() -> None:
    done: list[str] = []

    async def watch(scope: anyio.CancelScope) -> None:
        await anyio.sleep(0.01)
        scope.cancel()

    async def work() -> int:
        with anyio.CancelScope(shield=True):
            await anyio.sleep(0.05)  # a write in flight: finishes
            done.append("written")
        await anyio.sleep_forever()  # the next batch: never
        return 1

    assert anyio.run(beside, work(), watch) is None
    assert done == ["written"]
