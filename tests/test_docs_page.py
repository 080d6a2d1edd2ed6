"""/docs works offline: the page links only to assets the service itself serves (Swagger UI
from the installed package), never to a CDN."""

from __future__ import annotations

import re
from importlib.metadata import version

from swagger_ui_bundle import swagger_ui_path  # type: ignore[import-untyped]

from tests.conftest import app_client


def test_the_docs_page_needs_nothing_beyond_the_service(dsn: str) -> None:
    with app_client(dsn) as client:
        page = client.get("/docs")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        links = re.findall(r"""(?:src|href)=["']([^"']+)""", page.text)
        assert {link.rsplit("/", 1)[-1] for link in links} >= {
            "swagger-ui-bundle.js",
            "swagger-ui-standalone-preset.js",
            "swagger-ui.css",
        }
        assert not re.search(r"https?://", " ".join(links)), links
        for link in links:
            asset = client.get(link)
            assert asset.status_code == 200, link
            assert len(asset.content) > 500, link
        bundle = client.get(next(link for link in links if link.endswith("bundle.js"))).text
        # The served Swagger UI is the pinned package's, not whatever a CDN has today.
        assert swagger_ui_path.name == f"swagger-ui-{version('swagger-ui-bundle-v2')}"
        assert bundle == (swagger_ui_path / "swagger-ui-bundle.js").read_text()
        # The page carries the schema itself: no second request for it either.
        assert '"openapi":"3.1' in page.text.replace(" ", "")
