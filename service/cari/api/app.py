"""The Litestar application: lifespan (pool), dependencies, routes and error mapping."""

from __future__ import annotations

import logging
import math
import traceback
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import psycopg
from litestar import Litestar, MediaType, Request, Response, Router
from litestar.config.cors import CORSConfig
from litestar.datastructures import State
from litestar.di import Provide
from litestar.openapi.config import OpenAPIConfig
from litestar.openapi.spec import Components, SecurityScheme
from psycopg_pool import AsyncConnectionPool, PoolTimeout

import cari
from cari import db, logs, migrations, runtime
from cari.api import docs, tracing
from cari.api.answer import answer, tool
from cari.api.auth import require_api_key
from cari.api.catalog import CatalogController, FinancingRatesController
from cari.api.collections import CollectionsController
from cari.api.documents import DocumentsController
from cari.api.health import healthz, readyz
from cari.api.metrics import PROMETHEUS, MetricsController
from cari.api.request_ids import RequestIdMiddleware, echo_request_id
from cari.api.search import search
from cari.errors import (
    CariError,
    Conflict,
    DatabaseBusy,
    DatabaseUnavailable,
    EmbedderBusy,
    EmbedderUnavailable,
    InvalidBody,
    InvalidInput,
    LLMUnavailable,
    NotFound,
    StatementTimeout,
)
from cari.ingest.pipeline import backfill_embeddings
from cari.settings import Settings
from cari.supervisor import supervise

log = logging.getLogger(__name__)

STATUS = {
    NotFound: 404,
    Conflict: 409,
    InvalidInput: 422,
    InvalidBody: 400,
    DatabaseUnavailable: 503,
    DatabaseBusy: 503,
    StatementTimeout: 503,
    EmbedderUnavailable: 503,
    EmbedderBusy: 503,
    LLMUnavailable: 503,
}


async def provide_conn(state: State) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """One pooled connection per request (autocommit: the core opens transactions)."""
    pool: AsyncConnectionPool = state.pool
    async with pool.connection() as conn:
        yield conn


def error_response(request: Request[Any, Any, Any], exc: CariError) -> Response[dict[str, Any]]:
    status = next((code for kind, code in STATUS.items() if isinstance(exc, kind)), 400)
    body: dict[str, Any] = {"status_code": status, "detail": exc.message, "code": exc.code}
    if isinstance(exc, InvalidInput):
        body["extra"] = [{"key": exc.field, "message": exc.message}]
    headers = {}
    if exc.retry_after is not None:
        headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))
    return Response(body, status_code=status, media_type=MediaType.JSON, headers=headers)


def database_error(request: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    """The database failed the request: which way, truthfully, without its internals."""
    error = db.failure(exc, request.app.state.settings)
    # The driver's text can name hosts and users: it goes to the log, not to the client.
    log.warning("database error on %s %s: %s", request.method, request.url.path, exc)
    return error_response(request, error)


def bad_value(request: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    """A value PostgreSQL refuses (a NUL in a path, say): the client's input, not a 500."""
    message = " ".join(str(exc).split())
    return error_response(request, InvalidInput("request", f"invalid value: {message}"))


def nested_too_deeply(
    request: Request[Any, Any, Any], exc: RecursionError
) -> Response[dict[str, Any]]:
    """msgspec gives up on JSON nested about a thousand levels deep with a RecursionError:
    that is the client's body, a 400. Any other RecursionError is a fault of ours."""
    frames = [frame for frame, _ in traceback.walk_tb(exc.__traceback__)]
    decoding = bool(frames) and frames[-1].f_code.co_name == "decode_json"
    if not decoding:
        log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        body = {"status_code": 500, "detail": "Internal Server Error", "code": "internal_error"}
        return Response(body, status_code=500, media_type=MediaType.JSON)
    log.info("%s %s: JSON body nested too deeply", request.method, request.url.path)
    return error_response(
        request,
        InvalidBody("the JSON body is nested too deeply to decode (about 1,000 levels or more)"),
    )


def create_app(settings: Settings, dsn: str | None = None) -> Litestar:
    """Build the app. Without `dsn`, the database is located (or started) at startup."""
    # Checked here, not in the lifespan, so a configuration error stops `cari serve` in one line.
    runtime.check(settings)

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        # Do not wait for the pool: /readyz reports an unreachable database instead of the app
        # failing to start.
        async with runtime.open_runtime(settings, dsn=dsn, wait=False) as rt:
            app.state.pool = rt.pool
            app.state.ingestor = rt.ingestor
            app.state.searcher = rt.searcher
            app.state.answerer = rt.answerer
            async with anyio.create_task_group() as tasks:
                if settings.reembed_interval_s > 0:
                    tasks.start_soon(backfill_embeddings, rt.pool, rt.embedder, settings)
                if settings.database_url is None:  # the embedded server: ours to keep up
                    tasks.start_soon(supervise, settings.data_dir, rt.pool)
                yield
                tasks.cancel_scope.cancel()

    v1 = Router(
        path="/v1",
        route_handlers=[
            CollectionsController,
            DocumentsController,
            CatalogController,
            FinancingRatesController,
            search,
            answer,
            tool,
        ],
        guards=[require_api_key],
        dependencies={"conn": Provide(provide_conn)},
        security=[{"bearer": []}] if settings.api_keys else None,
    )
    logs.add_request_ids()
    return Litestar(
        route_handlers=[healthz, readyz, MetricsController, v1, docs.assets()],
        middleware=[RequestIdMiddleware(), PROMETHEUS.middleware, *tracing.middleware()],
        plugins=tracing.plugins(),
        before_send=[echo_request_id],
        # Logging is the process's (`cari.logs`, set up by the `cari` command): not reconfigured
        # by building an app.
        logging_config=None,
        # Room for a document at the size limit after JSON escaping, so the limit is reported
        # per document (422 naming it) rather than as a bare 413 for the whole body.
        request_max_body_size=max(4 * settings.max_document_bytes, 1 << 20),
        lifespan=[lifespan],
        # Browsers send the API key as a header: credentials (cookies) are never needed.
        cors_config=CORSConfig(allow_origins=settings.cors_origins)
        if settings.cors_origins
        else None,
        state=State({"settings": settings, "schema_head": migrations.head()}),
        exception_handlers={
            CariError: error_response,
            psycopg.OperationalError: database_error,
            psycopg.DataError: bad_value,
            PoolTimeout: database_error,
            RecursionError: nested_too_deeply,
        },
        openapi_config=OpenAPIConfig(
            title="Cari",
            version=cari.__version__,
            description="Hybrid search and RAG where all retrieval lives in PostgreSQL.",
            path="/docs",
            render_plugins=[docs.page()],
            components=Components(
                security_schemes={"bearer": SecurityScheme(type="http", scheme="bearer")}
            ),
        ),
    )
