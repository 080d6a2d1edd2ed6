"""Reads on replicas, writes on the primary, at the HTTP edge (`cari.db.replicas`).

A write's response carries `Cari-Consistency-Token` (only when read replicas are configured); a
search, answer or GET that sends it back reads what that write wrote. GET requests take their
connection from a replica, or the primary; every other method's from the primary. Searches and
answers choose their server in the searcher (`Searcher.search`), which can retry a failed
replica's search on the primary; a GET on a replica that fails is a 503 worth retrying at once.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Annotated, Any, cast

import psycopg
from litestar import Request
from litestar.datastructures import MutableScopeHeaders
from litestar.enums import ScopeType
from litestar.middleware import ASGIMiddleware
from litestar.params import HeaderParameter
from litestar.types import ASGIApp, HTTPScope, Message, Receive, Scope, Send
from psycopg_pool import PoolTimeout

from cari.api.state import AppState, app_state
from cari.observability import metrics
from cari.schema.consistency import HEADER, TOKEN_DESCRIPTION, parse_token

# A handler whose POST only reads (search, answer) says so: its response carries no token.
READS_ONLY = {"reads_only": True}
_READ_METHODS = {"GET", "HEAD"}

ConsistencyToken = Annotated[
    str | None,
    HeaderParameter(
        name=HEADER,
        max_length=17,
        description=TOKEN_DESCRIPTION,
        required=False,
    ),
]


def token(value: str | None) -> int | None:
    """The WAL position a read must see, from its header (422 if it is no token)."""
    return None if value is None else parse_token(value)


async def provide_conn(
    state: AppState, request: Request[Any, Any, Any]
) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """One pooled connection per request (autocommit: the core opens transactions): a GET's
    from a read replica when there is one in use, else from the primary."""
    reads = state.runtime.reads
    if request.method in _READ_METHODS:
        node = await reads.choose(token(request.headers.get(HEADER)))
        metrics.READS.labels(node.name).inc()
    else:
        node = reads.primary
    async with node.pool.connection() as conn:
        yield conn


class ConsistencyTokenMiddleware(ASGIMiddleware):
    """Puts the consistency token on the response of every write that succeeded."""

    scopes = (ScopeType.HTTP,)

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        reads = app_state(scope["litestar_app"]).runtime.reads
        if (
            not reads.replicas
            or cast("HTTPScope", scope)["method"] in _READ_METHODS
            or scope["route_handler"].opt.get("reads_only")
        ):
            await next_app(scope, receive, send)
            return

        async def send_with_token(message: Message) -> None:
            # The response starts once the handler returned: its writes are committed.
            if message["type"] == "http.response.start" and message["status"] < 400:
                # Without a token the write still stands; its reads may just not see it yet.
                with contextlib.suppress(psycopg.Error, PoolTimeout):
                    MutableScopeHeaders.from_message(message)[HEADER] = await reads.token()
            await send(message)

        await next_app(scope, receive, send_with_token)
