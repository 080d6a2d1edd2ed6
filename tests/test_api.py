"""The HTTP API against a real database: collections CRUD, errors, access, readiness."""

import re
from collections.abc import Iterator
from typing import Any

import msgspec
import psycopg
import pytest
from litestar.routes import HTTPRoute
from litestar.testing import TestClient
from litestar.utils.sync import AsyncCallable

from cari.schema.answer import AnswerRequest
from cari.schema.collections import CollectionCreate, CollectionUpdate
from cari.schema.search import SearchRequest
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
    # Made with the default embedder (CARI_EMBEDDER, local here): named, not null.
    assert (body["embedder"], body["next_embedder"]) == ("local", None)
    assert (body["search_mode"], body["top_k"], body["threshold"], body["rrf_k"]) == (
        "hybrid",
        5,
        0.25,
        60,
    )

    assert [c["name"] for c in client.get("/v1/collections").json()] == ["faq"]
    assert client.get("/v1/collections/faq").json()["language"] == "indonesian"
    assert client.get("/v1/collections/faq").json()["embedder"] == "local"
    assert [c["embedder"] for c in client.get("/v1/collections").json()] == ["local"]

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
    assert changed["embedder"] == "local"

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
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body["code"] == "invalid_input"
    assert body["type"] == "urn:cari:problem:invalid_input"
    assert [error["field"] for error in body["errors"]] == [field]
    assert body["detail"].startswith(f"{field}: ")


def test_unknown_language_is_named(client: TestClient[Any]) -> None:
    response = client.post("/v1/collections", json={"name": "k", "language": "klingon"})
    assert response.status_code == 422
    body = response.json()
    assert body["errors"][0]["field"] == "language"
    assert body["detail"] == f"language: {body['errors'][0]['message']}"
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
    assert response.json()["code"] == "invalid_body"
    assert "not valid JSON" in response.json()["detail"]


def problem(response: Any, status: int, code: str) -> dict[str, Any]:
    """The RFC 9457 body of `response`, checked to be of kind `code`."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert body["status"] == status and body["code"] == code
    assert body["type"] == f"urn:cari:problem:{code}"
    assert body["title"] and body["detail"]
    return body


def test_every_error_is_a_problem(client: TestClient[Any], dsn: str) -> None:
    missing = problem(client.get("/v1/collections/nope"), 404, "not_found")
    assert missing["detail"] == "collection 'nope' does not exist"
    assert missing["instance"] == "/v1/collections/nope"
    assert missing["title"] == "Not found"
    assert "errors" not in missing

    problem(client.get("/v2/nothing/here"), 404, "not_found")  # Litestar's own
    refused = client.put("/v1/collections")
    problem(refused, 405, "method_not_allowed")
    assert "GET" in refused.headers["allow"]

    bad_limit = problem(client.get("/v1/collections/nope/catalog?limit=0"), 422, "invalid_input")
    assert bad_limit["errors"] == [{"field": "limit", "message": "Expected `int` >= 1"}]
    problem(client.post("/v1/collections", json=[1]), 422, "invalid_input")

    with app_client(dsn, max_document_bytes=1000) as small:  # bodies up to 1 MiB
        body = b'{"name": "' + b"x" * (1 << 20) + b'"}'
        too_large = small.post(
            "/v1/collections", content=body, headers={"content-type": "application/json"}
        )
    problem(too_large, 413, "body_too_large")

    with app_client(dsn, api_keys="secret") as guarded:
        refused = guarded.get("/v1/collections")
    problem(refused, 401, "unauthorized")
    assert refused.headers["www-authenticate"] == "Bearer"


BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def _bounds(schema: dict[str, Any]) -> set[tuple[str, float]]:
    """The numeric bounds a property schema states, itself or in its alternatives."""
    found = {(key, float(schema[key])) for key in BOUNDS if key in schema}
    for alternative in schema.get("anyOf", []) + schema.get("oneOf", []):
        found |= _bounds(alternative)
    return found


def test_openapi_states_every_numeric_bound_the_server_enforces(client: TestClient[Any]) -> None:
    """Each bound of a request struct's numbers is in the OpenAPI document as msgspec states
    it. Litestar dropped a bound of 0 on an optional field (it tests the value's truth):
    `threshold` and the weights had no `minimum: 0`, which the server enforces."""
    documented = client.get("/docs/openapi.json").json()["components"]["schemas"]
    structs = (SearchRequest, AnswerRequest, CollectionCreate, CollectionUpdate)
    _, definitions = msgspec.json.schema_components(structs)
    for struct in structs:
        own = definitions[struct.__name__]["properties"]
        stated = documented[struct.__name__]["properties"]
        for field, schema in own.items():
            assert _bounds(stated[field]) == _bounds(schema), (struct.__name__, field)
    for struct in ("SearchRequest", "CollectionUpdate"):
        for field in ("threshold", "vector_weight", "keyword_weight"):
            assert ("minimum", 0.0) in _bounds(documented[struct]["properties"][field]), (
                struct,
                field,
            )


def test_openapi_documents_every_route(client: TestClient[Any], dsn: str) -> None:
    document = client.get("/docs/openapi.json").json()
    operations = [
        (path, operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if method in ("get", "post", "put", "patch", "delete")
    ]
    ids = [operation["operationId"] for _, operation in operations]
    assert len(set(ids)) == len(ids)
    assert all(id_[0].islower() and id_.isalnum() for id_ in ids), ids
    assert {"searchCollection", "addDocuments", "answerQuestion"} <= set(ids)
    for path, operation in operations:
        assert "{name}" not in path
        for status, response in operation["responses"].items():
            if status in ("401", "403"):  # keys may be stored at any time: /v1 states them
                assert path.startswith("/v1"), (path, status)
            if int(status) >= 400 and path.startswith("/v1"):
                assert list(response["content"]) == ["application/problem+json"], (path, status)
                assert response["content"]["application/problem+json"]["examples"]
            if int(status) < 300 and status != "204":
                assert response["content"]["application/json"]["schema"] != {}, (path, status)
    answer = document["paths"]["/v1/collections/{collection}/answer"]["post"]
    assert set(answer["responses"]["200"]["content"]) == {"application/json", "text/event-stream"}

    with app_client(dsn, api_keys="secret") as guarded:
        document = guarded.get("/docs/openapi.json").json()
    for path, item in document["paths"].items():
        for method, operation in item.items():
            assert ("401" in operation["responses"]) == path.startswith("/v1"), (method, path)


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


def test_guards_and_dependencies_run_on_the_event_loop(client: TestClient[Any]) -> None:
    """Litestar runs a plain-function guard or dependency in a worker thread: a thread hop on
    every request it applies to (the /v1 guards' hops cost `GET /v1/collections/{name}` a fifth
    of its throughput at 4 clients: docs/benchmarks.md). Every one is a coroutine function."""
    threaded = set()
    for route in client.app.routes:
        for handler in getattr(route, "route_handlers", []):
            for guard in handler.resolve_guards():
                if isinstance(guard, AsyncCallable):
                    threaded.add(f"guard {guard.func.__qualname__}")
            for name, provider in handler.resolve_dependencies().items():
                if provider.has_sync_callable and provider.sync_to_thread:
                    threaded.add(f"dependency {name}")
    assert not threaded


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
        assert listing.headers["content-type"] == "application/problem+json"
        assert listing.json()["code"] in ("database_unavailable", "database_busy")
        assert int(listing.headers["retry-after"]) >= 1
        assert "Traceback" not in listing.text


def test_openapi_schema_and_docs(client: TestClient[Any]) -> None:
    schema = client.get("/docs/openapi.json")
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    assert {"/v1/collections", "/v1/collections/{collection}", "/readyz", "/healthz"} <= set(paths)
    assert client.get("/docs").status_code == 200


def test_pool_applies_session_settings(dsn: str) -> None:
    with app_client(dsn, hnsw_ef_search=123, statement_timeout_ms=4567) as client:
        pool = client.app.state.runtime.pool
        values = client.blocking_portal.call(_show_settings, pool)
    assert values == ("123", "4567ms")


async def _show_settings(pool: Any) -> tuple[str, str]:
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT current_setting('hnsw.ef_search'), current_setting('statement_timeout')"
        )
        row = await cur.fetchone()
    return row[0], row[1]


def test_options_lists_every_method_of_the_route(client: TestClient[Any]) -> None:
    """Litestar 2 answers OPTIONS with the methods of the route's first handler only
    (litestar-org/litestar#4169): `/v1/collections` said `OPTIONS, POST`, GET missing."""
    routes = [route for route in client.app.routes if isinstance(route, HTTPRoute)]
    wrong = {}
    for route in routes:
        path = re.sub(r"\{(\w+):[^}]+\}", "x", route.path)
        answer = client.options(path)
        allowed = {method.strip() for method in answer.headers.get("allow", "").split(",")}
        if answer.status_code != 204 or allowed != set(route.methods):
            wrong[route.path] = (answer.status_code, answer.headers.get("allow"))
    assert len(routes) > 10 and wrong == {}
