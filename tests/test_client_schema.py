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

import msgspec
import pytest

from cari.client import AsyncClient, Client, routes
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
