"""Awaitables run side by side: all their results, or the first failure with the rest stopped."""

from __future__ import annotations

import asyncio

import pytest

from cari.concurrency import all_or_none


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
