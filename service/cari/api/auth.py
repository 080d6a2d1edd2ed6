"""Bearer-key access to `/v1` when `CARI_API_KEYS` is set."""

from __future__ import annotations

import hmac

from litestar.connection import ASGIConnection
from litestar.exceptions import NotAuthorizedException
from litestar.handlers.base import BaseRouteHandler

from cari.settings import Settings


# Async, though it awaits nothing: Litestar runs a sync guard in a worker thread.
async def require_api_key(connection: ASGIConnection, _: BaseRouteHandler) -> None:  # type: ignore[type-arg]
    settings: Settings = connection.app.state.settings
    if not settings.api_keys:
        return
    scheme, _sep, token = connection.headers.get("authorization", "").partition(" ")
    presented = token.strip().encode()
    # Compare against every key, without stopping early, so timing reveals nothing.
    matched = False
    for key in settings.api_keys:
        matched |= hmac.compare_digest(presented, key.encode())
    if scheme.lower() != "bearer" or not matched:
        raise NotAuthorizedException(
            detail="missing or invalid API key: send 'Authorization: Bearer <key>'",
            headers={"WWW-Authenticate": "Bearer"},
        )
