"""A server span per HTTP request, when the process sends traces (`cari.observability.tracing`).

Litestar's OpenTelemetry plugin (OpenTelemetry's ASGI instrumentation) wraps the whole app, so
it starts the span before routing: the span is named by the method alone, which is what
OpenTelemetry's HTTP conventions name a request no route matched. Once routed, `NameByRoute`
renames it `METHOD /route/{template}` and sets `http.route`: names and attributes stay bounded,
never a collection's or document's name. Each span carries the request's id
(`cari.request_id`), which every log line of the request carries too.

The probes and /metrics are not traced: called every few seconds, they would drown the requests
worth looking at.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from litestar.enums import ScopeType
from litestar.middleware import ASGIMiddleware
from litestar.plugins import PluginProtocol
from litestar.types import ASGIApp, HTTPScope, Receive, Scope, Send

from cari.api.request_ids import request_id
from cari.observability import tracing

if TYPE_CHECKING:
    from opentelemetry.trace import Span

UNTRACED = "^/(healthz|readyz|metrics)$"


def plugins() -> list[PluginProtocol]:
    """Litestar's OpenTelemetry plugin if the process sends traces, else none."""
    if not tracing.active():
        return []
    from litestar.plugins.opentelemetry import OpenTelemetryConfig, OpenTelemetryPlugin

    def start(scope: Scope) -> tuple[str, dict[str, Any]]:
        return str(scope.get("method", scope["type"])), {}

    def tag(span: Span, scope: dict[str, Any]) -> None:
        span.set_attribute("cari.request_id", request_id(cast("Scope", scope)))

    config = OpenTelemetryConfig(
        scope_span_details_extractor=start,
        server_request_hook_handler=tag,
        exclude=UNTRACED,
        # ASGI's receive and send events as spans of their own tell nothing here.
        exclude_spans=["receive", "send"],
    )
    return [OpenTelemetryPlugin(config)]


def middleware() -> list[ASGIMiddleware]:
    """The routed requests' span renamed by route, if the process sends traces."""
    return [NameByRoute()] if tracing.active() else []


class NameByRoute(ASGIMiddleware):
    scopes = (ScopeType.HTTP,)
    exclude_path_pattern = UNTRACED

    def __init__(self) -> None:
        from opentelemetry.trace import get_current_span

        self.current_span = get_current_span

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        route = scope["path_template"]
        span = self.current_span()
        span.update_name(f"{cast('HTTPScope', scope)['method']} {route}")
        span.set_attribute("http.route", route)
        await next_app(scope, receive, send)
