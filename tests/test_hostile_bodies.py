"""Pathological request bodies get a 4xx on every route that takes a body, never a 500: JSON
nested past what the decoder takes, huge numbers, invalid UTF-8, NUL characters."""

from __future__ import annotations

from typing import Any

import pytest
from litestar.testing import TestClient

from cari.limits import NUL_REFUSED
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


NUL = "a\x00b"
# (method, path under the collection "nul", body, the field a 422 names): a NUL in each kind of
# string the server stores or matches on.
NUL_CASES = [
    ("POST", "/v1/collections", {"name": "other", "no_information": NUL}, "no_information"),
    ("PATCH", "", {"pricing_keywords": ["harga", NUL]}, "pricing_keywords"),
    ("PUT", "/synonyms", {"rules": [f"{NUL}, c"]}, "rules"),
    ("POST", "/documents", {"id": NUL, "text": "x"}, "id"),
    ("PUT", "/documents/d1", {"text": "x", "title": NUL}, "title"),
    ("PUT", "/documents/d1", {"text": "x", "source": NUL}, "source"),
    ("PUT", "/documents/d1", {"text": "x", "metadata": {"k": [1, {NUL: 2}]}}, "metadata"),
    ("GET", "/documents?source=a%00b", None, "source"),
    ("GET", "/v1/collections/a%00b", None, "collection"),
    ("GET", "/documents/a%00b", None, "document_id"),
    ("DELETE", "/catalog/a%00b", None, "sku"),
    ("GET", "/documents?metadata=%7B%22k%22%3A%22a%5Cu0000b%22%7D", None, "metadata.k"),
    ("POST", "/catalog", [{"sku": NUL, "name": "n"}], "items[0].sku"),
    ("POST", "/catalog", [{"sku": "s", "name": "n", "variant": NUL}], "items[0].variant"),
    (
        "POST",
        "/catalog",
        [{"sku": "s", "name": "n", "attributes": {"k": NUL}}],
        "items[0].attributes",
    ),
    (
        "POST",
        "/financing-rates",
        [{"provider": NUL, "tenor_months": 12, "rate": 0.05, "rate_type": "flat"}],
        "items[0].provider",
    ),
    (
        "POST",
        "/search",
        {"query": "x", "mode": "keyword", "filters": {"metadata": {"k": {"in": [NUL]}}}},
        "filters.metadata.k.in",
    ),
    (
        "POST",
        "/search",
        {"query": "x", "mode": "keyword", "filters": {"document_ids": ["d", NUL]}},
        "filters.document_ids",
    ),
]


def test_a_nul_anywhere_is_refused_in_the_same_words(dsn: str) -> None:
    """One rule, one message, the field named (a synonym rule's message names the rule)."""
    with app_client(dsn) as client:
        assert client.post("/v1/collections", json={"name": "nul"}).status_code == 201
        for method, path, body, field in NUL_CASES:
            where = path if path.startswith("/v1/") else f"/v1/collections/nul{path}"
            response = client.request(method, where, json=body)
            assert response.status_code == 422, (method, path, response.text)
            [error] = response.json()["errors"]
            assert error["field"] == field, (method, path, error)
            assert error["message"].endswith(NUL_REFUSED), (method, path, error)
            assert field == "rules" or error["message"] == NUL_REFUSED
        batch = {
            "documents": [{"id": "fine", "text": "x"}, {"id": "d2", "text": "x", "title": NUL}]
        }
        answer = client.post("/v1/collections/nul/documents", json=batch).json()
        assert answer["rejected"] == [{"index": 1, "id": "d2", "reason": f"title: {NUL_REFUSED}"}]
        # A question's and a document's text's NULs are dropped, not refused.
        put = client.put("/v1/collections/nul/documents/d3", json={"text": "Cicilan\x00 ringan"})
        assert put.status_code == 200, put.text
        found = client.post(
            "/v1/collections/nul/search", json={"query": "cicilan\x00", "mode": "keyword"}
        )
        assert found.status_code == 200 and found.json()["results"], found.text
