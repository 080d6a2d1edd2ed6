"""Keeps the embedded PostgreSQL up under a running service.

If the server dies without shutting down (kill -9, the OOM killer), requests get 503s until it is
back: the supervisor notices within a second, starts it again (PostgreSQL recovers from its
WAL), retrying with backoff while the dead server's processes still hold its memory, and
replaces the pool's broken connections so the next requests succeed. A deliberate stop
(`cari db stop --force`) removes the postmaster's pid file and is left alone.
"""

from __future__ import annotations

import logging
from pathlib import Path

import anyio
import anyio.to_thread
from psycopg_pool import AsyncConnectionPool

from cari.db import embedded
from cari.errors import DatabaseUnavailable

log = logging.getLogger(__name__)

CHECK_INTERVAL_S = 1.0
BACKOFF_S = (0.5, 8.0)  # first and longest wait between failed starts


async def supervise(data_dir: Path, pool: AsyncConnectionPool) -> None:
    """Run until cancelled."""
    while True:
        await anyio.sleep(CHECK_INTERVAL_S)
        if not await anyio.to_thread.run_sync(embedded.crashed, data_dir):
            continue
        log.warning("the embedded PostgreSQL in %s died; starting it again", data_dir)
        wait = BACKOFF_S[0]
        while True:
            try:
                await anyio.to_thread.run_sync(embedded.restart, data_dir)
                break
            except DatabaseUnavailable as exc:
                log.warning("%s; trying again in %g s", exc, wait)
                await anyio.sleep(wait)
                wait = min(wait * 2, BACKOFF_S[1])
        # Idle connections still point at the dead server: test each, replace the broken.
        await pool.check()
        log.warning("the embedded PostgreSQL is back")
