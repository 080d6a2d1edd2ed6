"""The search console at /console: a page for looking at why results rank as they do; and the
service's front page at `/`, which links it and the API's docs.

The page and its scripts are files in the package (`cari/console`), served as they are: no
build step, no CDN, so it works offline. The page itself holds no data and is public; every
data call it makes goes to `/v1` with the API key the user types in, like any other client.
"""

from __future__ import annotations

from pathlib import Path

from litestar import MediaType, Response, Router, get
from litestar.static_files import create_static_files_router

FOLDER = Path(__file__).resolve().parent.parent / "console"
PATH = "/console"
# Everything from the service itself: a CDN link or an injected inline script would not run.
POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


async def _with_policy(response: Response) -> Response:  # type: ignore[type-arg]
    response.headers["Content-Security-Policy"] = POLICY
    return response


def routes() -> Router:
    """The page (`/console`), its scripts and its styles. The page links to them by absolute
    paths: it is served at `/console` and `/console/` alike."""
    return create_static_files_router(
        path=PATH,
        directories=[FOLDER],
        html_mode=True,
        include_in_schema=False,
        after_request=_with_policy,
    )


@get("/", media_type=MediaType.HTML, include_in_schema=False, after_request=_with_policy)
async def home() -> str:
    """The front page: what the service is, with links to the console and the API's docs."""
    return (FOLDER / "home.html").read_text()


@get("/favicon.ico", media_type="image/svg+xml", include_in_schema=False)
async def favicon() -> bytes:
    """The console's icon, where a browser asks for one without a page's link."""
    return (FOLDER / "icon.svg").read_bytes()
