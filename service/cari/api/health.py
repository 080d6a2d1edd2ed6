"""Liveness and readiness probes; open even when API keys are required."""

from __future__ import annotations

import logging

import psycopg
from litestar import Response, get
from litestar.datastructures import State
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from cari import migrations

log = logging.getLogger(__name__)


@get("/healthz", summary="The process is up", sync_to_thread=False)
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@get("/readyz", summary="The database is reachable and migrated to head")
async def readyz(state: State) -> Response[dict[str, str]]:
    pool: AsyncConnectionPool = state.pool
    expected: str = state.schema_head
    try:
        async with pool.connection(timeout=2.0) as conn:
            revision = await migrations.current(conn)
    except (PoolTimeout, psycopg.OperationalError) as exc:
        # Details go to the log: this endpoint answers without an API key.
        log.warning("readiness: database unreachable: %s", exc)
        return _not_ready("database unreachable")
    if revision != expected:
        return _not_ready(
            f"database schema at revision {revision or 'none'}, expected {expected}: "
            "run `cari migrate`"
        )
    return Response({"status": "ready", "schema": revision})


def _not_ready(reason: str) -> Response[dict[str, str]]:
    return Response({"status": "unavailable", "reason": reason}, status_code=503)
