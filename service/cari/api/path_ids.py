"""Ids in a URL path (document ids, SKUs), read exactly as the client sent them.

The ASGI server percent-decodes `scope["path"]` and Litestar's router then drops leading,
trailing and doubled slashes: `…/documents/x%2F` reaches a handler as `x`, `a%2F%2Fb` as `a/b`,
and `…/documents/%2F` reaches the collection's own `…/documents` — whose DELETE empties it. So a
single-item handler takes its id from the raw path, decoded once, and a collection-wide handler
refuses a raw path that names an item.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote_to_bytes

from litestar.connection import ASGIConnection
from litestar.handlers import BaseRouteHandler

from cari.errors import NotFound
from cari.limits import refuse_nul


def _raw_path(connection: ASGIConnection[Any, Any, Any, Any]) -> bytes | None:
    raw = connection.scope.get("raw_path")  # optional in ASGI; uvicorn and Litestar's tests set it
    if not isinstance(raw, bytes):
        return None
    return raw.partition(b"?")[0]  # Litestar's test client leaves the query in it


def path_id(connection: ASGIConnection[Any, Any, Any, Any], routed: Path, kind: str) -> str:
    """The id after `/collections/{name}/{kind}/` as sent, percent-decoded once; `routed` (the
    router's normalised value) only when the server gives no raw path."""
    raw = _raw_path(connection)
    if raw is not None:
        prefix = re.search(rb"/collections/+[^/]+/+" + re.escape(kind.encode()) + rb"/", raw)
        if prefix is not None and prefix.end() < len(raw):
            return unquote_to_bytes(raw[prefix.end() :]).decode("utf-8", "replace")
    return routed.as_posix().removeprefix("/")


async def nul_free(
    connection: ASGIConnection[Any, Any, Any, Any], _handler: BaseRouteHandler
) -> None:
    """Guard of every route under /v1: a path parameter (a collection's name, a document's id, a
    SKU) holding NUL (`%00`) is refused as any string holding one is (`refuse_nul`). A
    coroutine, as every guard: Litestar runs a plain function in a worker thread, a thread hop
    for every request (tests/test_api.py)."""
    for name, value in connection.path_params.items():
        refuse_nul(name, str(value))


async def whole_collection(
    connection: ASGIConnection[Any, Any, Any, Any], _handler: BaseRouteHandler
) -> None:
    """Guard of a collection-wide route: refuse a raw path with an id after the route's own
    (`…/documents/%2F` names the document '/', never every document)."""
    raw = _raw_path(connection)
    if raw is None:
        return
    own = connection.scope["path"].rstrip("/").rsplit("/", 1)[-1].encode()
    if not raw.removesuffix(b"/").endswith(b"/" + own):
        after = raw.rsplit(b"/" + own + b"/", 1)[-1]
        found = unquote_to_bytes(after).decode("utf-8", "replace")
        raise NotFound(f"'{found}' does not exist: an id of only '/' cannot be stored")
