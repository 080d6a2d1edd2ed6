"""Pathological request bodies get a 4xx on every route that takes a body, never a 500: JSON
nested past what the decoder takes, huge numbers, invalid UTF-8, NUL characters."""

from __future__ import annotations

from typing import Any

import pytest
from litestar.testing import TestClient

from tests.conftest import app_client

BODIES = {
    "nested 1,000 deep": b"[" * 1000 + b"]" * 1000,
    "nested 100,000 deep": b"[" * 100_000 + b"]" * 100_000,
    "object nested in a field": b'{"query": ' + b"[" * 3000 + b"]" * 3000 + b"}",
    "huge number": b'{"query": "x", "top_k": ' + b"9" * 5000 + b"}",
    "huge float": b'{"name": "x", "threshold": 1e999999}',
    "invalid UTF-8": b'{"query": "\xff\xfe", "name": "\xc3\x28"}',
    "NUL": b'{"query": "a\\u0000b", "name": "a\\u0000b", "id": "a\\u0000b", "text": "\\u0000"}',
}


def _routes_with_bodies(client: TestClient[Any]) -> list[tuple[str, str]]:
    paths = client.get("/docs/openapi.json").json()["paths"]
    found = []
    for path, operations in paths.items():
        for method, operation in operations.items():
            if method in ("post", "put", "patch") and "requestBody" in operation:
                concrete = path.replace("{collection}", "deep")
                concrete = concrete.replace("{document_id}", "d1").replace("{sku}", "s1")
                found.append((method, concrete))
    return found


def test_pathological_bodies_get_a_4xx_everywhere(dsn: str) -> None:
    with app_client(dsn) as client:
        assert client.post("/v1/collections", json={"name": "deep"}).status_code == 201
        routes = _routes_with_bodies(client)
        assert len(routes) >= 8  # collections, documents (POST, PUT), catalog, rates, search, ...
        for method, path in routes:
            for name, body in BODIES.items():
                response = client.request(
                    method, path, content=body, headers={"content-type": "application/json"}
                )
                assert 400 <= response.status_code < 500, (method, path, name, response.text)
        assert client.get("/v1/collections/deep").status_code == 200  # and it still serves


@pytest.mark.parametrize("depth", [1000, 20_000])
def test_deep_nesting_says_what_is_wrong(dsn: str, depth: int) -> None:
    with app_client(dsn) as client:
        body = b"[" * depth + b"]" * depth
        response = client.post(
            "/v1/collections", content=body, headers={"content-type": "application/json"}
        )
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_body"
    assert "nested too deeply" in response.json()["detail"]
