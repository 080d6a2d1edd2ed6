"""The API docs page at /docs: Swagger UI from the installed `swagger-ui-bundle-v2` package, so
the page works offline and its version is the pinned dependency's, not a CDN's `@latest`."""

from __future__ import annotations

from litestar import Router
from litestar.openapi.plugins import SwaggerRenderPlugin
from litestar.static_files import create_static_files_router
from swagger_ui_bundle import swagger_ui_path  # type: ignore[import-untyped]

ASSETS = "/docs/assets"


def assets() -> Router:
    """Swagger UI's scripts, styles and icon, served from the package's folder."""
    return create_static_files_router(
        path=ASSETS, directories=[swagger_ui_path], include_in_schema=False
    )


def page() -> SwaggerRenderPlugin:
    """The docs page, linking only to `assets()` (Litestar's defaults point at CDNs)."""
    return SwaggerRenderPlugin(
        js_url=f"{ASSETS}/swagger-ui-bundle.js",
        css_url=f"{ASSETS}/swagger-ui.css",
        standalone_preset_js_url=f"{ASSETS}/swagger-ui-standalone-preset.js",
        favicon=f"<link rel='icon' type='image/png' href='{ASSETS}/favicon-32x32.png'>",
        path="/",
    )
