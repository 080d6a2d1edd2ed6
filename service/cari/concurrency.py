"""Awaitables run side by side, all or none."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar, cast

T = TypeVar("T")
A = TypeVar("A")
B = TypeVar("B")


async def all_or_none(*awaitables: Awaitable[T]) -> list[T]:
    """Their results in order, as `asyncio.gather` gives them; when one raises (or this is
    cancelled), the others are cancelled and awaited before the exception propagates. `gather`
    alone leaves them running: a search whose keyword statement failed kept its other parts'
    statements going on the pool's connections, for results nobody would read. Not
    `asyncio.TaskGroup` (or anyio's task groups), which cancel the others as well but raise an
    `ExceptionGroup`: the error would no longer be the `CariError` that `api/problems.py`
    maps to its status."""
    tasks = [asyncio.ensure_future(awaitable) for awaitable in awaitables]
    try:
        return await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


async def both(first: Awaitable[A], second: Awaitable[B]) -> tuple[A, B]:
    """Two awaitables of different types side by side, all or none (`all_or_none`)."""
    a, b = await all_or_none(first, second)
    return cast(A, a), cast(B, b)
