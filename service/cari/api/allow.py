"""The `Allow` header of an OPTIONS answer: every method of the route.

Litestar 2 makes a route's OPTIONS handler when its first handler is registered and keeps it as
the route grows, so `Allow` lists that first handler's methods alone (`/v1/collections`:
`OPTIONS, POST`, GET missing; litestar-org/litestar#4169, fixed in Litestar 3). This hook sets
the header from the finished route.
"""

from __future__ import annotations

from litestar.datastructures import MutableScopeHeaders
from litestar.routes import HTTPRoute
from litestar.types import Message, Scope


async def every_method(message: Message, scope: Scope) -> None:
    """`before_send` hook: the `Allow` header of an OPTIONS answer lists all its route's
    methods. Async, as `echo_request_id` is (a sync hook runs in a worker thread)."""
    if message["type"] != "http.response.start" or scope.get("method") != "OPTIONS":
        return
    headers = MutableScopeHeaders.from_message(message)
    template = scope.get("path_template")
    if "allow" not in headers or template is None:
        return
    for route in scope["litestar_app"].routes:
        if isinstance(route, HTTPRoute) and route.path_format == template:
            headers["allow"] = ", ".join(sorted(route.methods))
            return
