"""The Litestar application: lifespan (the runtime), dependencies, routes, error handlers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from litestar import Litestar, Router
from litestar.config.cors import CORSConfig
from litestar.datastructures import State
from litestar.di import Provide
from litestar.openapi.config import OpenAPIConfig
from litestar.openapi.spec import Components, SecurityScheme

import cari
from cari import runtime
from cari.api import allow, console, docs, problems, tracing
from cari.api.answer import answer, tool
from cari.api.auth import authorize
from cari.api.catalog import CatalogController, FinancingRatesController
from cari.api.collections import CollectionsController
from cari.api.consistency import ConsistencyTokenMiddleware, provide_conn
from cari.api.documents import DocumentsController
from cari.api.evaluate import evaluate_collection
from cari.api.health import healthz, readyz
from cari.api.keys import KeysController, access
from cari.api.mcp import mcp
from cari.api.metrics import PROMETHEUS, MetricsController
from cari.api.openapi import DocumentedAsPlugin, ZeroBoundsPlugin, state_rules
from cari.api.path_ids import nul_free
from cari.api.request_ids import RequestIdMiddleware, echo_request_id
from cari.api.search import search
from cari.api.tune import tune_ef_search, tune_fusion
from cari.db import migrations
from cari.keys import StoredKeys
from cari.mcp.server import http_sessions
from cari.observability import logs
from cari.schema.consistency import HEADER
from cari.settings import LOCAL_EMBEDDER, Settings


def create_app(settings: Settings, dsn: str | None = None) -> Litestar:
    """Build the app. Without `dsn`, the database is located (or started) at startup."""
    # Checked here, not in the lifespan, so a configuration error stops `cari serve` in one line.
    runtime.check(settings)

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        # Do not wait for the pool: /readyz reports an unreachable database instead of the app
        # failing to start.
        async with (
            runtime.open_runtime(settings, dsn=dsn, wait=False, serving=True) as rt,
            http_sessions(rt) as mcp_sessions,
        ):
            # What handlers read, typed: cari.api.state.AppState.
            app.state.runtime = rt
            app.state.mcp = mcp_sessions
            yield

    v1 = Router(
        path="/v1",
        route_handlers=[
            CollectionsController,
            DocumentsController,
            CatalogController,
            FinancingRatesController,
            KeysController,
            access,
            search,
            evaluate_collection,
            answer,
            tool,
            tune_ef_search,
            tune_fusion,
        ],
        guards=[authorize, nul_free],
        dependencies={"conn": Provide(provide_conn)},
        # With CARI_API_KEYS a key is required; without, optional until a key is stored
        # (cari.api.auth), which the document, made at start, cannot know.
        security=[{"bearer": []}] if settings.api_keys else [{"bearer": []}, {}],
    )
    logs.add_request_ids()
    app = Litestar(
        route_handlers=[
            healthz,
            readyz,
            MetricsController,
            v1,
            mcp,
            docs.assets(),
            console.routes(),
            console.home,
            console.favicon,
        ],
        middleware=[
            RequestIdMiddleware(),
            PROMETHEUS.middleware,
            *tracing.middleware(),
            ConsistencyTokenMiddleware(),
        ],
        before_send=[echo_request_id, allow.every_method],
        # Logging is the process's (`cari.observability.logs`, set up by the `cari` command): not
        # reconfigured by building an app.
        logging_config=None,
        # Room for a document at the size limit after JSON escaping, so the limit is reported
        # per document (422 naming it) rather than as a bare 413 for the whole body.
        request_max_body_size=max(4 * settings.max_document_bytes, 1 << 20),
        lifespan=[lifespan],
        # Browsers send the API key as a header: credentials (cookies) are never needed.
        cors_config=CORSConfig(allow_origins=settings.cors_origins, expose_headers=[HEADER])
        if settings.cors_origins
        else None,
        state=State(
            {
                "settings": settings,
                "schema_head": migrations.head(),
                "stored_keys": StoredKeys(settings.key_cache_ttl_s),
            }
        ),
        exception_handlers=problems.HANDLERS,
        plugins=[*tracing.plugins(), DocumentedAsPlugin(), ZeroBoundsPlugin()],
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
    # The rules the types do not say, stated before the document is first served.
    state_rules(app.openapi_schema, [LOCAL_EMBEDDER, *settings.embedders])
    return app
