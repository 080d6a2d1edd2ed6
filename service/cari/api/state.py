"""The app's state as handlers read it, typed.

The app starts with `settings`, `schema_head` and `stored_keys`; its lifespan adds the runtime
it opens (`cari.runtime`) and the MCP transport running on it. A handler takes `state:
AppState` (Litestar builds it on the app's own state, not a copy); middleware and guards, given
the app, call `app_state`.
"""

from __future__ import annotations

from litestar import Litestar
from litestar.datastructures import State
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from cari.keys import StoredKeys
from cari.runtime import Runtime
from cari.settings import Settings


class AppState(State):
    settings: Settings
    schema_head: str  # the migrations' head: what /readyz expects the database at
    stored_keys: StoredKeys  # what this process read of the stored API keys
    runtime: Runtime  # from the lifespan on
    mcp: StreamableHTTPSessionManager  # from the lifespan on


def app_state(app: Litestar) -> AppState:
    return AppState(app.state)
