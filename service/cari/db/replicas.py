"""Reads on PostgreSQL streaming replicas, writes on the primary (`CARI_READ_DATABASE_URLS`).

Searches, answers and the API's GET reads run on a replica, in turn among those in use; writes,
migrations and the BM25 statistics upkeep use the runtime's primary pool only. With no replica
configured every read runs on the primary, as it always did.

A replica is in use while it answers and is at most `CARI_MAX_REPLICA_LAG_S` behind. Every
`CHECK_INTERVAL_S` the primary's flushed WAL position is sampled and each replica is asked how
far it has replayed. Its lag is how long ago the primary first had WAL the replica has still not
replayed: the age of the oldest sample past the replica's position. That is 0 on an idle primary
(`now() - pg_last_xact_replay_timestamp()` grows while nothing is written), needs nothing
from the primary but its WAL position (`pg_stat_replication` names standbys, not the URLs Cari
reads from), and is exact to the check interval. A replica that fails a check or a read is taken
out; the next check it passes puts it back, with its broken pooled connections replaced.

Read-your-writes: a write's response carries a consistency token, the primary's flushed WAL
position once the write committed (its commit record ends at or before it). A read that sends
the token runs on a replica that has replayed that far, waiting up to `CARI_REPLICA_WAIT_S` for
one, else on the primary.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from cari.db.queries import query
from cari.errors import NotFound
from cari.observability import metrics
from cari.schema.consistency import HEADER, format_token

log = logging.getLogger(__name__)

T = TypeVar("T")
PRIMARY = "primary"
CHECK_INTERVAL_S = 0.5
CHECK_TIMEOUT_S = 2.0  # a replica that takes longer to answer a check is out
POLL_S = 0.005  # between looks at the replicas' positions while a token read waits


@dataclass(eq=False)
class Node:
    """A server reads may run on: the primary, or a replica with what the checks found."""

    name: str
    pool: AsyncConnectionPool
    url: str | None = None  # a replica's: its checks connect on their own, outside the pool
    in_use: bool = False
    replayed: int = 0
    lag_s: float | None = None
    monitor: psycopg.AsyncConnection[Any] | None = field(default=None, repr=False)

    @property
    def primary(self) -> bool:
        return self.url is None


class Reads:
    """Chooses the server each read runs on, and keeps the replicas' state."""

    def __init__(
        self,
        primary: AsyncConnectionPool,
        replicas: Sequence[tuple[str, AsyncConnectionPool]],
        *,
        max_lag_s: float,
        wait_s: float,
    ) -> None:
        self.primary = Node(PRIMARY, primary, in_use=True)
        self.replicas = [
            Node(f"replica{n}", pool, url=url) for n, (url, pool) in enumerate(replicas, 1)
        ]
        self.max_lag_s = max_lag_s
        self.wait_s = wait_s
        self._turn = itertools.count()
        # (monotonic time, primary's flushed position): enough to tell a lag past the bound.
        self._samples: deque[tuple[float, int]] = deque()

    async def run(self, token: int | None, work: Callable[[Node], Awaitable[T]]) -> T:
        """`work` on the server a read goes to; on the primary again when a replica fails
        under it (a statement timeout is the read's own and is not retried)."""
        node = await self.choose(token)
        try:
            result = await work(node)
        except (psycopg.OperationalError, PoolTimeout) as exc:
            if node.primary or isinstance(exc, psycopg.errors.QueryCanceled):
                raise
            # A recovery conflict cancels one query on a healthy replica: retry, keep it.
            if getattr(exc, "sqlstate", None) != "40001":
                self._take_out(node, f"a read failed there ({type(exc).__name__})")
            node = self.primary
            result = await work(node)
        except NotFound as exc:
            if node.primary:
                raise
            raise NotFound(
                f"{exc.message} (read on {node.name}, a replica: what was written moments ago "
                f"is there once replicated; send the write's {HEADER} header to read it at once)"
            ) from None
        metrics.READS.labels(node.name).inc()
        return result

    async def choose(self, token: int | None) -> Node:
        """A replica in use, in turn; with `token`, one that has replayed it, waiting up to
        `wait_s` for one; else the primary."""
        in_use = [node for node in self.replicas if node.in_use]
        if not in_use:
            return self.primary
        start = next(self._turn)
        order = [in_use[(start + i) % len(in_use)] for i in range(len(in_use))]
        if token is None:
            return order[0]
        with anyio.move_on_after(self.wait_s):
            while True:
                for node in order:
                    if node.replayed >= token or await self._position(node) >= token:
                        return node
                await anyio.sleep(POLL_S)
        return self.primary

    async def token(self) -> str:
        """The consistency token for writes committed so far."""
        async with self.primary.pool.connection() as conn:
            cur = await conn.execute(query("wal_flushed"))
            row = await cur.fetchone()
        assert row is not None
        return format_token(int(row[0]))

    async def watch(self) -> None:
        """Check the replicas every `CHECK_INTERVAL_S` until cancelled."""
        while True:
            await anyio.sleep(CHECK_INTERVAL_S)
            await self.check()

    async def check(self) -> None:
        """Sample the primary's position, then check every replica against the samples."""
        now = time.monotonic()
        with contextlib.suppress(psycopg.Error, PoolTimeout, TimeoutError):
            with anyio.fail_after(CHECK_TIMEOUT_S):
                async with self.primary.pool.connection(timeout=CHECK_TIMEOUT_S) as conn:
                    cur = await conn.execute(query("wal_flushed"))
                    row = await cur.fetchone()
            assert row is not None
            self._samples.append((now, int(row[0])))
        # Older samples only tell that a lag is past the bound, which the oldest kept tells too.
        horizon = now - self.max_lag_s - 2 * CHECK_INTERVAL_S
        while len(self._samples) > 1 and self._samples[1][0] < horizon:
            self._samples.popleft()
        await asyncio.gather(*(self._check(node, now) for node in self.replicas))

    def states(self) -> list[tuple[str, bool, float | None]]:
        """Each replica's name, whether it is in use, and its lag in seconds (None: unknown)."""
        return [(node.name, node.in_use, node.lag_s) for node in self.replicas]

    async def close(self) -> None:
        for node in self.replicas:
            if node.monitor is not None:
                await node.monitor.close()

    async def _check(self, node: Node, now: float) -> None:
        assert node.url is not None
        try:
            with anyio.fail_after(CHECK_TIMEOUT_S):
                if node.monitor is None or node.monitor.closed:
                    node.monitor = await psycopg.AsyncConnection.connect(
                        node.url, autocommit=True, connect_timeout=int(CHECK_TIMEOUT_S)
                    )
                cur = await node.monitor.execute(query("replica_position"))
                row = await cur.fetchone()
        except (psycopg.Error, TimeoutError) as exc:
            if node.monitor is not None:
                await node.monitor.close()
                node.monitor = None
            self._take_out(node, f"it does not answer ({type(exc).__name__})")
            return
        assert row is not None
        standby, replayed = row
        if not standby or replayed is None:
            self._take_out(node, "it is not a standby (promoted, or a primary)")
            return
        node.replayed = max(node.replayed, int(replayed))
        node.lag_s = self._lag(node.replayed, now)
        if node.lag_s > self.max_lag_s:
            self._take_out(node, f"it is {node.lag_s:.1f} s behind the primary")
            return
        if not node.in_use:
            # Pooled connections may have broken while it was out: test them, replace those.
            await node.pool.check()
            node.in_use = True
            log.warning("%s is in use for reads", node.name)

    def _lag(self, replayed: int, now: float) -> float:
        """How long ago the primary first had WAL past `replayed` (0: nothing missing)."""
        missing = next((t for t, position in self._samples if position > replayed), None)
        return 0.0 if missing is None else now - missing

    def _take_out(self, node: Node, reason: str) -> None:
        if node.in_use:
            log.warning("%s is out of reads: %s", node.name, reason)
        node.in_use = False

    async def _position(self, node: Node) -> int:
        """The replica's replayed position now, or -1 when it cannot tell."""
        try:
            async with node.pool.connection() as conn:
                cur = await conn.execute(query("replica_position"))
                row = await cur.fetchone()
        except (psycopg.Error, PoolTimeout):
            return -1
        if row is None or row[1] is None:
            return -1
        node.replayed = max(node.replayed, int(row[1]))
        return node.replayed
