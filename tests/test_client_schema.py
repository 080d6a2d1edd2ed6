"""The client and the HTTP API cannot drift apart: the client's table of operations
(`cari.client.routes`) matches the app's OpenAPI document operation by operation — method,
path, query parameters, and the fields (names, which are required) of what it sends and of what
it decodes — both clients have a method for each, and the blocking client is the one
`scripts/sync_client.py` writes from the async one."""

from __future__ import annotations

import inspect
import re
import runpy
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from cari.client import AsyncClient, Client, SearchRequest, SearchResponse, routes
from tests.test_openapi_conformance import DOCUMENT

ROOT = Path(__file__).resolve().parents[1]
METHODS = {"get", "post", "put", "patch", "delete"}
OPERATIONS = {
    operation["operationId"]: (method.upper(), path, operation)
    for path, item in DOCUMENT["paths"].items()
    for method, operation in item.items()
    if method in METHODS
}
ROUTES = {route.operation: route for route in routes.ROUTES}


def _snake(operation_id: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", operation_id).lower()


def _resolve(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    """A schema with its `$ref` followed and a lone `allOf` unwrapped."""
    while True:
        if "$ref" in schema:
            schema = components[schema["$ref"].rsplit("/", 1)[1]]
        elif len(schema.get("allOf", [])) == 1:
            schema = schema["allOf"][0]
        else:
            return schema


def shape(schema: dict[str, Any], components: dict[str, Any]) -> object:
    """What the client and the server must agree on: an object's field names and which are
    required; an array's items; a choice of shapes."""
    schema = _resolve(schema, components)
    # An object's own `anyOf` narrows its fields (text or content): still that object.
    if ("anyOf" in schema or "oneOf" in schema) and "properties" not in schema:
        return {"any of": [shape(s, components) for s in schema.get("anyOf", schema.get("oneOf"))]}
    if schema.get("type") == "array":
        return {"items": shape(schema["items"], components)}
    if schema.get("type") == "object" or "properties" in schema:
        return {
            "fields": sorted(schema.get("properties", {})),
            "required": sorted(schema.get("required", [])),
        }
    return schema.get("type")


def client_shape(kind: Any) -> object:
    """The shape of a type the client sends or decodes, from msgspec's own JSON schema of it."""
    (schema,), components = msgspec.json.schema_components(
        [kind], ref_template="#/components/schemas/{name}"
    )
    return shape(schema, components)


def documented_shape(schema: dict[str, Any]) -> object:
    return shape(schema, DOCUMENT["components"]["schemas"])


def test_the_client_has_every_operation_of_the_document() -> None:
    assert len(OPERATIONS) >= 24  # the document was read
    assert sorted(ROUTES) == sorted(OPERATIONS)
    for name, route in ROUTES.items():
        method, path, _ = OPERATIONS[name]
        assert (route.method, route.path) == (method, path), name


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_each_operation_sends_and_decodes_what_the_document_says(name: str) -> None:
    route = ROUTES[name]
    _, _, operation = OPERATIONS[name]
    query = [p["name"] for p in operation.get("parameters", []) if p["in"] == "query"]
    assert list(route.query) == query
    body = operation.get("requestBody", {}).get("content", {}).get("application/json")
    if route.body is None:
        assert body is None
    else:
        documented = documented_shape(body["schema"])
        sent = client_shape(route.body)
        # A body documented as a choice (one document, or a batch): the client sends one of them.
        assert sent in documented.get("any of", [documented]), (sent, documented)  # type: ignore[union-attr]
    success = next(r for status, r in operation["responses"].items() if status.startswith("2"))
    content = success.get("content", {}).get("application/json")
    if route.answer is None:
        assert content is None
    else:
        assert client_shape(route.answer) == documented_shape(content["schema"]), name


def test_the_shapes_compared_name_the_fields() -> None:
    """The comparison above sees fields and required ones, so a renamed field would fail it."""
    shape = client_shape(routes.SEARCH_COLLECTION.body)
    assert isinstance(shape, dict) and "top_k" in shape["fields"] and shape["required"] == ["query"]


@pytest.mark.parametrize("client", [Client, AsyncClient])
def test_both_clients_have_a_method_for_each_operation(client: type) -> None:
    missing = [name for name in OPERATIONS if not hasattr(client, _snake(name))]
    assert not missing, missing


def test_both_clients_have_the_same_methods() -> None:
    def methods(client: type) -> dict[str, list[str]]:
        return {
            name: list(inspect.signature(method).parameters)
            for name, method in vars(client).items()
            if callable(method) and not name.startswith("_") and name not in {"close", "aclose"}
        }

    assert methods(Client) == methods(AsyncClient)


def test_the_blocking_client_is_written_from_the_async_one() -> None:
    script = runpy.run_path(str(ROOT / "scripts" / "sync_client.py"))
    written = (ROOT / "service" / "cari" / "client" / "_sync" / "client.py").read_text()
    assert written == script["sync_source"](), "run scripts/sync_client.py"


def test_search_fields_have_one_name() -> None:
    """`signal` and `routes`; their former names `intent` and `intents` are gone."""
    schemas = DOCUMENT["components"]["schemas"]
    for struct in ("SearchResponse", "Explain", "SubQueryExplain"):
        assert "routes" in schemas[struct]["properties"], struct
        assert not {"intent", "intents"} & set(schemas[struct]["properties"]), struct


NEW = {
    "query": "SKU-1 harga",
    "mode": "hybrid",
    "signal": "exact_token",
    "routes": ["knowledge", "pricing"],
    "sub_queries": ["SKU-1 harga"],
    "results": [],
    "degraded": [],
    "warnings": [],
}
SUB_QUERY = {
    "query": "SKU-1 harga",
    "candidates": {"keyword": 1},
    "keyword_postings_read": None,
    "query_vector_cached": False,
    "routes": {"knowledge": "always", "pricing": "keyword 'harga'"},
    "kept": [],
    "dropped": [],
    "timings_ms": {},
}
EXPLAIN = {
    "served_by": "primary",
    "mode": "hybrid",
    "signal": {"name": "exact_token", "exact_tokens": [{"text": "SKU-1", "kind": "sku"}]},
    "decomposition": {"sub_queries": ["SKU-1 harga"], "pattern": None, "kept_whole_because": None},
    "routes": {"knowledge": ["always"], "pricing": ["keyword 'harga'"]},
    "fusion": "rrf",
    "weights": {"keyword": 2.0, "vector": 0.5},
    "rrf_k": 60,
    "top_k": 5,
    "threshold": None,
    "relevance_scale": {"cosine_floor": 0.8, "cosine_ceiling": 0.9, "source": "settings"},
    "candidates": {"requested": 50},
    "keyword_engine": "sql",
    "ef_search": {"requested": 40, "applied": "40", "source": "settings"},
    "query_vector_cached": False,
    "filters": {},
    "sub_queries": [SUB_QUERY],
    "structured": {},
    "timings_ms": {},
}


def test_the_client_decodes_a_search_response() -> None:
    body = NEW | {"explain": EXPLAIN}
    answer = httpx.Response(200, content=msgspec.json.encode(body))
    call = routes.SEARCH_COLLECTION.call(SearchRequest(query="SKU-1 harga"), collection="c")
    decoded = call.decode(answer)
    assert isinstance(decoded, SearchResponse)
    assert (decoded.signal, decoded.routes) == ("exact_token", ["knowledge", "pricing"])
    assert decoded.explain is not None
    assert decoded.explain.signal.exact_tokens[0].text == "SKU-1"
    assert decoded.explain.routes == EXPLAIN["routes"]
    (part,) = decoded.explain.sub_queries
    assert part.routes == SUB_QUERY["routes"]
