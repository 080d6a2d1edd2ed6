"""The HTTP API against a real database: collections CRUD, errors, access, readiness."""

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from litestar.testing import TestClient

from tests.conftest import app_client


@pytest.fixture
def client(dsn: str) -> Iterator[TestClient[Any]]:
    with app_client(dsn) as test_client:
        yield test_client


def test_collection_lifecycle(client: TestClient[Any]) -> None:
    created = client.post("/v1/collections", json={"name": "faq", "language": "indonesian"})
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["name"] == "faq"
    assert body["language"] == "indonesian"
    assert (body["search_mode"], body["top_k"], body["threshold"], body["rrf_k"]) == (
        "hybrid",
        5,
        0.25,
        60,
    )

    assert [c["name"] for c in client.get("/v1/collections").json()] == ["faq"]
    assert client.get("/v1/collections/faq").json()["language"] == "indonesian"

    patched = client.patch(
        "/v1/collections/faq", json={"top_k": 8, "keyword_weight": 2.0, "search_mode": "keyword"}
    )
    assert patched.status_code == 200, patched.text
    changed = patched.json()
    assert (changed["top_k"], changed["keyword_weight"], changed["search_mode"]) == (
        8,
        2.0,
        "keyword",
    )
    assert changed["language"] == "indonesian"  # untouched fields keep their values
    assert changed["vector_weight"] == 1.0

    assert client.delete("/v1/collections/faq").status_code == 204
    assert client.get("/v1/collections/faq").status_code == 404
    assert client.delete("/v1/collections/faq").status_code == 404


def test_language_change_reindexes_text(client: TestClient[Any], dsn: str) -> None:
    client.post("/v1/collections", json={"name": "kb", "language": "simple"})
    with psycopg.connect(dsn) as conn:
        cid = conn.execute("SELECT id FROM collections WHERE name = 'kb'").fetchone()
        assert cid is not None
        doc = conn.execute(
            "INSERT INTO documents (collection_id, external_id, content_hash) "
            "VALUES (%s, 'd', 'h') RETURNING id",
            cid,
        ).fetchone()
        assert doc is not None
        conn.execute(
            "INSERT INTO chunks (collection_id, document_id, ordinal, content, language) "
            "VALUES (%s, %s, 0, 'running engines', 'simple')",
            (cid[0], doc[0]),
        )
    assert client.patch("/v1/collections/kb", json={"language": "english"}).status_code == 200
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT language::text, tsv::text FROM chunks").fetchone()
    assert row == ("english", "'engin':2B 'run':1B")


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"name": ""}, "name"),
        ({"name": "x" * 64}, "name"),
        ({"name": "Not A Slug"}, "name"),
        ({"name": "-leading"}, "name"),
        ({"name": "ok", "top_k": 0}, "top_k"),
        ({"name": "ok", "top_k": 51}, "top_k"),
        ({"name": "ok", "threshold": 1.5}, "threshold"),
        ({"name": "ok", "vector_weight": -1}, "vector_weight"),
        ({"name": "ok", "search_mode": "fuzzy"}, "search_mode"),
        ({"name": "ok", "colour": "blue"}, "colour"),
        ({}, "name"),
        ({"name": "ok", "language": "a.b.c.d"}, "language"),
        ({"name": "ok", "language": "123"}, "language"),
        ({"name": "ok", "language": '"'}, "language"),
    ],
)
def test_invalid_collection_names_the_field(
    client: TestClient[Any], payload: dict[str, Any], field: str
) -> None:
    response = client.post("/v1/collections", json=payload)
    assert response.status_code == 400, response.text
    body = response.json()
    assert field in {item["key"] for item in body["extra"]} or field in str(body["extra"])
    assert "Traceback" not in response.text


def test_unknown_language_is_named(client: TestClient[Any]) -> None:
    response = client.post("/v1/collections", json={"name": "k", "language": "klingon"})
    assert response.status_code == 422
    body = response.json()
    assert body["extra"][0]["key"] == "language"
    assert "klingon" in body["detail"] and "indonesian" in body["detail"]

    client.post("/v1/collections", json={"name": "k"})
    response = client.patch("/v1/collections/k", json={"language": "klingon"})
    assert response.status_code == 422
    assert client.get("/v1/collections/k").json()["language"] == "simple"


def test_name_with_trailing_newline_is_refused(client: TestClient[Any]) -> None:
    response = client.post("/v1/collections", json={"name": "faq\n"})
    assert response.status_code in (400, 422), response.text
    assert "name" in response.text


def test_duplicate_collection_conflicts(client: TestClient[Any]) -> None:
    assert client.post("/v1/collections", json={"name": "dup"}).status_code == 201
    response = client.post("/v1/collections", json={"name": "dup"})
    assert response.status_code == 409
    assert response.json()["detail"] == "collection 'dup' exists already"


def test_malformed_json_is_a_client_error(client: TestClient[Any]) -> None:
    response = client.post(
        "/v1/collections", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 400


def test_api_keys_guard_v1_only(dsn: str) -> None:
    with app_client(dsn, api_keys="first,second") as client:
        assert client.get("/v1/collections").status_code == 401
        wrong = client.get("/v1/collections", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        assert wrong.headers["www-authenticate"] == "Bearer"
        basic = client.get("/v1/collections", headers={"Authorization": "Basic second"})
        assert basic.status_code == 401
        for key in ("first", "second"):
            ok = client.get("/v1/collections", headers={"Authorization": f"Bearer {key}"})
            assert ok.status_code == 200
        assert client.get("/healthz").status_code == 200
        assert client.get("/readyz").status_code == 200


def test_cors_answers_only_the_configured_origins(dsn: str) -> None:
    origin = "https://app.example"
    preflight = {
        "Origin": origin,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type",
    }
    with app_client(dsn, api_keys="key", cors_origins=f"{origin},https://other.example") as client:
        # A preflight carries no credentials: it must pass without the key.
        allowed = client.options("/v1/collections/faq/search", headers=preflight)
        assert allowed.status_code in (200, 204)
        assert allowed.headers["access-control-allow-origin"] == origin
        assert "authorization" in allowed.headers["access-control-allow-headers"].lower()
        read = client.get(
            "/v1/collections", headers={"Origin": origin, "Authorization": "Bearer key"}
        )
        assert read.status_code == 200
        assert read.headers["access-control-allow-origin"] == origin
        stranger = {**preflight, "Origin": "https://evil.example"}
        refused = client.options("/v1/collections/faq/search", headers=stranger)
        assert "access-control-allow-origin" not in refused.headers
    with app_client(dsn) as client:  # the default: no cross-origin access at all
        plain = client.get("/v1/collections", headers={"Origin": origin})
        assert "access-control-allow-origin" not in plain.headers


def test_ready_when_migrated(client: TestClient[Any]) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["status"] == "ready"


def test_not_ready_when_not_migrated(empty_dsn: str) -> None:
    with app_client(empty_dsn) as client:
        response = client.get("/readyz")
    assert response.status_code == 503
    assert "cari migrate" in response.json()["reason"]


def test_not_ready_when_database_unreachable() -> None:
    dsn = "postgresql://cari@127.0.0.1:9/cari?connect_timeout=1"
    with app_client(dsn, pool_timeout_s=1) as client:
        assert client.get("/healthz").status_code == 200
        response = client.get("/readyz")
        assert response.status_code == 503
        assert "unreachable" in response.json()["reason"]
        listing = client.get("/v1/collections")
        assert listing.status_code == 503
        assert "Traceback" not in listing.text


def test_openapi_schema_and_docs(client: TestClient[Any]) -> None:
    schema = client.get("/docs/openapi.json")
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    assert {"/v1/collections", "/v1/collections/{name}", "/readyz", "/healthz"} <= set(paths)
    assert client.get("/docs").status_code == 200


def test_pool_applies_session_settings(dsn: str) -> None:
    with app_client(dsn, hnsw_ef_search=123, statement_timeout_ms=4567) as client:
        pool = client.app.state.pool
        values = client.blocking_portal.call(_show_settings, pool)
    assert values == ("123", "4567ms")


async def _show_settings(pool: Any) -> tuple[str, str]:
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT current_setting('hnsw.ef_search'), current_setting('statement_timeout')"
        )
        row = await cur.fetchone()
    return row[0], row[1]
