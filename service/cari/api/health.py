"""Liveness and readiness probes; open even when API keys are required."""

from __future__ import annotations

import logging

import psycopg
from litestar import Response, get
from litestar.openapi.datastructures import ResponseSpec
from psycopg_pool import PoolTimeout

from cari.api.state import AppState
from cari.db import migrations
from cari.schema.health import DamagedCollection, Health, Readiness

log = logging.getLogger(__name__)


@get("/healthz", summary="The process is up", operation_id="getHealth", sync_to_thread=False)
def healthz() -> Health:
    return Health("ok")


@get(
    "/readyz",
    summary="The database is reachable and migrated to head (degraded: damaged keyword blocks)",
    operation_id="getReadiness",
    responses={503: ResponseSpec(Readiness, description="Not ready", generate_examples=False)},
)
async def readyz(state: AppState) -> Response[Readiness]:
    pool = state.runtime.pool
    expected: str = state.schema_head
    keyword_engine = state.runtime.keyword_engine
    try:
        async with pool.connection(timeout=2.0) as conn:
            revision = await migrations.current(conn)
            engine = await keyword_engine.current(conn)
            damaged = await keyword_engine.damage.current(conn)
    except (PoolTimeout, psycopg.OperationalError) as exc:
        # Details go to the log: this endpoint answers without an API key.
        log.warning("readiness: database unreachable: %s", exc)
        return _not_ready("database unreachable")
    if revision != expected:
        return _not_ready(
            f"database schema at revision {revision or 'none'}, expected {expected}: "
            "run `cari migrate`"
        )
    return Response(
        Readiness(
            "degraded" if damaged else "ready",
            schema=revision,
            keyword_engine=engine.name,
            keyword_engine_version=engine.version,
            damaged=[
                DamagedCollection(d.collection, [str(block) for block in d.blocks]) for d in damaged
            ]
            or None,
        )
    )


def _not_ready(reason: str) -> Response[Readiness]:
    return Response(Readiness("unavailable", reason=reason), status_code=503)
