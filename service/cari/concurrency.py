"""Awaitables run side by side, all or none."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar, cast

import anyio

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


async def beside(
    work: Awaitable[T], watcher: Callable[[anyio.CancelScope], Coroutine[Any, Any, object]]
) -> T | None:
    """`work`'s result, with `watcher(scope)` running beside it until `work` ends; None when
    the watcher cancels `scope` first, which stops `work` as anyio cancels (shielded parts
    finish). An exception of `work` propagates as itself, not in the `ExceptionGroup` an anyio
    task group wraps it in (`all_or_none`): `cari ingest` into a missing collection printed a
    traceback instead of its one-line error."""
    failure: Exception | None = None
    result: T | None = None
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(watcher, tasks.cancel_scope)
        try:
            result = await work
        except Exception as exc:  # raised below, outside the task group
            failure = exc
        tasks.cancel_scope.cancel()
    if failure is not None:
        raise failure
    return result


async def both(first: Awaitable[A], second: Awaitable[B]) -> tuple[A, B]:
    """Two awaitables of different types side by side, all or none (`all_or_none`)."""
    a, b = await all_or_none(first, second)
    return cast(A, a), cast(B, b)
