"""/mcp: Cari's MCP tools over streamable HTTP, behind the same API keys as /v1. The guard
(`cari.api.auth`) lets in a key that may search or read documents; each tool then checks what
its HTTP route would (its action, the collection it names) and runs within the key's filter
(`cari.mcp.tools.call`).

The SDK's transport (`cari.mcp.server.http_sessions`, running in the app's lifespan on the
app's runtime) answers the requests; Litestar routes them and checks the key first. It is not a
REST route, so it is no part of the OpenAPI document.
"""

from __future__ import annotations

from litestar import Litestar, asgi
from litestar.types import Receive, Scope, Send

from cari.api.auth import authorize, requires
from cari.api.consistency import READS_ONLY
from cari.api.state import app_state


# Its tools only read: its responses carry no consistency token.
@asgi(
    "/mcp",
    guards=[authorize],
    copy_scope=True,
    opt={**READS_ONLY, **requires("search", "documents:read")},
)
async def mcp(scope: Scope, receive: Receive, send: Send) -> None:
    sessions = app_state(Litestar.from_scope(scope)).mcp
    await sessions.handle_request(scope, receive, send)  # type: ignore[arg-type]
