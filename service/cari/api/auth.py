"""Who a `/v1` or `/mcp` request is and whether it may do what it asks, decided here for every
route from what the route declares (`requires`).

A request's key is one of CARI_API_KEYS (every action, every collection) or a key stored in
the database (`cari.keys`). With neither configured nor stored the API is open, as before keys
were stored; from the first stored key on (revoked ones count) every request needs a key, so
that revoking the last key never opens the API. A stored key is read at most
`CARI_KEY_CACHE_TTL_S` ago (`cari.keys.StoredKeys`): a revocation or expiry holds on every process
sharing the database within that time, without a restart.

A key with a filter sees only the documents matching it: the guard sets it as the request's
tenant filter (`cari.search.filters.TENANT`), which every filter compiled for the request then
includes, so no route can forget it.
"""

from __future__ import annotations

import hmac
from typing import Any

from litestar.connection import ASGIConnection
from litestar.exceptions import NotAuthorizedException
from litestar.handlers.base import BaseRouteHandler

from cari.api.state import app_state
from cari.errors import Forbidden
from cari.keys import EVERY_COLLECTION, EVERYTHING, SCOPE_KEY, Access, StoredKeys
from cari.observability import logs, tracing
from cari.search.filters import TENANT

OPEN = Access("open API", None, EVERYTHING, (EVERY_COLLECTION,))
CONFIGURED = Access("CARI_API_KEYS", None, EVERYTHING, (EVERY_COLLECTION,))


def requires(*actions: str, beyond_filter: bool = False) -> dict[str, Any]:
    """A route's `opt`: any of `actions` lets a request through. `beyond_filter`: the route
    acts on more than a key's filter lets it see (a whole collection's documents): refused to
    a key with a filter."""
    unknown = set(actions) - EVERYTHING
    assert actions and not unknown, unknown
    return {"actions": frozenset(actions), "beyond_filter": beyond_filter}


# A collection's own settings and rules: any key that reaches the collection reads them (the
# console and the clients need them to search, read or write it).
READ_COLLECTION = requires("search", "documents:read", "documents:write", "collections:manage")


async def authorize(
    connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler
) -> None:
    """Guard of every /v1 route and /mcp. Async, though a lookup may not be needed: Litestar
    runs a sync guard in a worker thread."""
    TENANT.set(None)  # nothing carried over from whatever ran before in this context
    if connection.scope.get("method") == "OPTIONS":  # Litestar's answer: a route's methods
        return
    needed: frozenset[str] | None = handler.opt.get("actions")
    if not needed:  # a route that declares nothing is refused, not opened
        raise Forbidden(f"{connection.url.path} declares no action: no key may use it")
    access = await _access(connection)
    connection.scope[SCOPE_KEY] = access  # type: ignore[literal-required]
    # The request's log lines and its trace name the key (its prefix, never its secret).
    logs.api_key.set(access.prefix or access.name)
    tracing.tag("cari.api_key", access.prefix or access.name)
    access.check_action(needed)
    if access.filter is not None and handler.opt.get("beyond_filter"):
        raise Forbidden(f"{access.who} has a filter: it may not act beyond the documents it sees")
    if (collection := connection.path_params.get("collection")) is not None:
        access.check_reaches(str(collection))
    TENANT.set(access.filter)


def access_of(connection: ASGIConnection[Any, Any, Any, Any]) -> Access:
    """The Access the guard found for this request."""
    access: Access = connection.scope[SCOPE_KEY]  # type: ignore[literal-required]
    return access


async def _access(connection: ASGIConnection[Any, Any, Any, Any]) -> Access:
    state = app_state(connection.app)
    settings = state.settings
    scheme, _sep, token = connection.headers.get("authorization", "").partition(" ")
    presented = token.strip() if scheme.lower() == "bearer" else ""
    # Compare against every configured key, without stopping early, so timing reveals nothing.
    matched = False
    for configured in settings.api_keys:
        matched |= hmac.compare_digest(presented.encode(), configured.encode())
    if matched:
        return CONFIGURED
    stored: StoredKeys = state.stored_keys
    pool = state.runtime.pool
    if presented.startswith("cari_") and (key := await stored.find(pool, presented)):
        return key.access()
    if not settings.api_keys and not await stored.any(pool):
        return OPEN
    raise NotAuthorizedException(
        detail="missing or invalid API key: send 'Authorization: Bearer <key>'",
        headers={"WWW-Authenticate": "Bearer"},
    )
