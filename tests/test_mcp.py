"""The MCP server through the official SDK's own client: `cari mcp` over stdio, and `/mcp` of a
running `cari serve` over streamable HTTP, each a real subprocess on a seeded database."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import msgspec
import pytest
from litestar.testing import TestClient
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from cari.schema.answer import AnswerRequest, AnswerResponse
from cari.schema.documents import Document
from cari.schema.search import SearchRequest, SearchResponse
from cari.settings import LOCAL_EMBEDDING_DIMENSION
from tests.conftest import app_client, cli_env
from tests.fake_openai import FakeOpenAI
from tests.test_cli import serving

pytestmark = pytest.mark.anyio

DOCUMENTS = [
    {
        "id": "tires.md",
        "title": "Tires",
        "text": "Rotate the tires every ten thousand kilometres to keep the tread even.",
        "metadata": {"year": 2024},
    },
    {
        "id": "brakes.md",
        "title": "Brakes",
        "text": "Replace the brake pads when they are thinner than three millimetres.",
        "metadata": {"year": 2020},
    },
]
QUESTION = {"collection": "garage", "query": "rotate the tires to keep the tread even"}


@pytest.fixture(scope="module")
def embedder() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(dimension=LOCAL_EMBEDDING_DIMENSION) as server:
        yield server


def add_garage(client: TestClient[Any], name: str = "garage") -> None:
    """The collection `name` with the two documents."""
    created = client.post("/v1/collections", json={"name": name, "language": "english"})
    assert created.status_code == 201, created.text
    added = client.post(f"/v1/collections/{name}/documents", json={"documents": DOCUMENTS})
    assert added.status_code == 200 and not added.json()["rejected"], added.text


@pytest.fixture(scope="module")
def garage(module_dsn: str, embedder: FakeOpenAI) -> str:
    """The module's database, holding the collection `garage` with two documents."""
    with app_client(module_dsn, embedder) as client:
        add_garage(client)
    return module_dsn


@pytest.fixture
def env(garage: str, embedder: FakeOpenAI, clean_env: dict[str, str]) -> dict[str, str]:
    return cli_env(clean_env, garage, embedder)


@asynccontextmanager
async def stdio_session(env: dict[str, str]) -> AsyncIterator[ClientSession]:
    server = StdioServerParameters(command=sys.executable, args=["-m", "cari.cli", "mcp"], env=env)
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@asynccontextmanager
async def http_session(
    url: str, headers: dict[str, str], statuses: list[int] | None = None
) -> AsyncIterator[ClientSession]:
    """A session with the MCP endpoint at `url`, sending `headers`; the status of each HTTP
    response is appended to `statuses`."""

    async def record(response: httpx2.Response) -> None:
        if statuses is not None:
            statuses.append(response.status_code)

    async with (
        httpx2.AsyncClient(
            headers=headers, timeout=30, event_hooks={"response": [record]}
        ) as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def _fields(struct: type[msgspec.Struct]) -> set[str]:
    return {field.name for field in msgspec.structs.fields(struct)}


def _result(called: Any) -> dict[str, Any]:
    """A successful tool result's structured content, checked against its text copy."""
    assert isinstance(called, CallToolResult)
    assert not called.is_error, called.content
    (text,) = called.content
    assert text.type == "text" and json.loads(text.text) == called.structured_content
    assert isinstance(called.structured_content, dict)
    return called.structured_content


def _error(called: Any) -> str:
    assert isinstance(called, CallToolResult) and called.is_error, called
    assert called.structured_content is None
    (text,) = called.content
    assert text.type == "text"
    return text.text


async def test_stdio_tools_take_the_http_requests_and_answer_with_their_responses(
    env: dict[str, str], garage: str, embedder: FakeOpenAI
) -> None:
    async with stdio_session(env) as session:
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert set(listed) == {"search", "answer", "list_collections", "get_document"}
        # Every field the HTTP API's request takes, and nothing else; the response likewise.
        expected = {
            "search": ({"collection"} | _fields(SearchRequest), SearchResponse),
            "answer": ({"collection"} | _fields(AnswerRequest) - {"stream"}, AnswerResponse),
            "get_document": ({"collection", "document_id"}, Document),
        }
        for name, (arguments, response) in expected.items():
            schema = listed[name].input_schema
            assert set(schema["properties"]) == arguments, name
            assert schema["additionalProperties"] is False
            output = listed[name].output_schema
            assert output is not None and set(output["properties"]) == _fields(response), name
        search = listed["search"].input_schema
        assert search["required"] == ["collection", "query"]
        assert search["properties"]["top_k"] == {
            "type": "integer",
            "minimum": 1,
            "maximum": 50,
            "description": "How many results at most.",
        }
        assert search["properties"]["mode"]["enum"] == ["hybrid", "keyword", "vector"]
        assert listed["list_collections"].input_schema["properties"] == {}
        assert all(tool.annotations and tool.annotations.read_only_hint for tool in listed.values())

        # The SDK's client checks each structured result against the tool's output schema.
        found = _result(await session.call_tool("search", {**QUESTION, "mode": "keyword"}))
        first = found["results"][0]
        assert (first["document_id"], first["title"], first["kind"]) == (
            "tires.md",
            "Tires",
            "chunk",
        )
        assert "Rotate the tires" in first["content"] and 0 < first["relevance"] <= 1
        # The same search through the HTTP API: the same results.
        with app_client(garage, embedder) as client:
            http = client.post(
                "/v1/collections/garage/search",
                json={"query": QUESTION["query"], "mode": "keyword"},
            ).json()
        assert found["results"] == http["results"]

        # Filters narrow it: the one document about tires is from 2024.
        for year, found_ids in (({"gte": 2021}, ["tires.md"]), ({"lte": 2021}, [])):
            filters = {"metadata": {"year": year}}
            filtered = _result(
                await session.call_tool(
                    "search", {**QUESTION, "mode": "keyword", "filters": filters}
                )
            )
            assert [r["document_id"] for r in filtered["results"]] == found_ids

        answered = _result(await session.call_tool("answer", QUESTION))
        assert answered["model"] == "extractive" and not answered["no_information"]
        assert "Rotate the tires" in answered["answer"] and "[1]" in answered["answer"]
        assert answered["citations"]["1"]["document_id"] == "tires.md"

        collections = _result(await session.call_tool("list_collections", {}))
        assert [c["name"] for c in collections["collections"]] == ["garage"]
        assert collections["collections"][0]["language"] == "english"

        document = _result(
            await session.call_tool(
                "get_document", {"collection": "garage", "document_id": "brakes.md"}
            )
        )
        assert (document["id"], document["title"], document["metadata"]) == (
            "brakes.md",
            "Brakes",
            {"year": 2020},
        )
        assert [chunk["content"] for chunk in document["chunks"]] == [DOCUMENTS[1]["text"]]

        # What the caller can fix comes back as the tool's error, in Cari's words.
        unknown = {**QUESTION, "collection": "nope"}
        assert _error(await session.call_tool("search", unknown)) == (
            "collection 'nope' does not exist"
        )
        assert _error(await session.call_tool("answer", unknown)) == (
            "collection 'nope' does not exist"
        )
        bad_filter = {**QUESTION, "filters": {"metadata": {"year": {"gt": 2020}}}}
        assert _error(await session.call_tool("search", bad_filter)) == (
            "filters.metadata.year: unknown operator 'gt'; use in, gte or lte"
        )
        assert _error(
            await session.call_tool("search", {**QUESTION, "filters": {"lang": "en"}})
        ) == ("filters.lang: unknown filter; use metadata or document_ids")
        assert _error(await session.call_tool("search", {**QUESTION, "top_k": 500})) == (
            "top_k: Expected `int` <= 50"
        )
        assert _error(await session.call_tool("search", {"collection": "garage"})) == (
            "query: Object missing required field `query`"
        )
        assert _error(await session.call_tool("search", {"query": "tires"})) == (
            "collection: is required"
        )
        assert _error(await session.call_tool("answer", {**QUESTION, "stream": True})) == (
            "stream: is not an argument of answer"
        )
        assert _error(
            await session.call_tool("get_document", {"collection": "garage", "document_id": "x"})
        ) == ("document 'x' does not exist in 'garage'")
        assert _error(
            await session.call_tool("get_document", {"collection": "Garage!", "document_id": "x"})
        ).startswith("collection: Expected `str` matching regex")
        # A value PostgreSQL refuses is the caller's too (the HTTP API's 422).
        assert _error(
            await session.call_tool(
                "get_document", {"collection": "garage", "document_id": "a\x00"}
            )
        ).startswith("arguments: invalid value: ")
        with pytest.raises(MCPError, match="unknown tool 'delete'"):
            await session.call_tool("delete", {})

        # The server is still there after them all.
        assert _result(await session.call_tool("list_collections", {}))["collections"]


async def test_serve_offers_the_tools_at_mcp_behind_the_api_keys(env: dict[str, str]) -> None:
    with serving({**env, "CARI_API_KEYS": "s3cret"}) as base:
        url = f"{base}/mcp"
        statuses: list[int] = []
        async with http_session(url, {"Authorization": "Bearer s3cret"}, statuses) as session:
            found = _result(await session.call_tool("search", {**QUESTION, "mode": "keyword"}))
            assert found["results"][0]["document_id"] == "tires.md"
            assert _error(
                await session.call_tool("search", {**QUESTION, "collection": "nope"})
            ) == ("collection 'nope' does not exist")
        assert statuses and set(statuses) <= {200, 202}, statuses
        # Without the key the endpoint answers as /v1 does: 401, saying how to send it.
        async with httpx.AsyncClient() as client:
            refused = await client.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == "Bearer"
        assert refused.json()["code"] == "unauthorized"
        assert "send 'Authorization: Bearer <key>'" in refused.json()["detail"]
        # The SDK's own client, without the key: refused.
        statuses.clear()
        with pytest.raises(ExceptionGroup) as refused_session:
            async with http_session(url, {}, statuses):
                pass
        assert refused_session.group_contains(MCPError, depth=None)
        assert statuses == [401]


async def test_a_scoped_key_reaches_through_the_tools_only_what_it_may(
    dsn: str, embedder: FakeOpenAI, clean_env: dict[str, str]
) -> None:
    """Keys for one collection with a filter (`year` 2024: a tenant's), one that only
    searches, one that also reads documents: each tool checks what its HTTP route checks, and
    sees the documents the filter matches, as that search sent with the filter would."""
    only_2024 = {"year": 2024}
    with app_client(dsn, embedder) as client:
        add_garage(client)
        add_garage(client, "shed")

        def key(actions: list[str], collections: list[str], **scope: Any) -> dict[str, str]:
            body = {"name": "k", "actions": actions, "collections": collections, **scope}
            created = client.post("/v1/keys", json=body, headers=admin)
            assert created.status_code == 201, created.text
            return {"Authorization": f"Bearer {created.json()['secret']}"}

        admin: dict[str, str] = {}  # the first key, made while the API is open
        admin = key(["search", "documents:read", "keys:manage"], ["*"])
        searcher = key(["search"], ["garage"], filter=only_2024)
        reader = key(["search", "documents:read"], ["garage"], filter=only_2024)
        # The same search by the admin, with the filter sent: what the tenant must see.
        body = {"query": "the tires and the brake pads", "mode": "keyword", "top_k": 10}
        filtered = client.post(
            "/v1/collections/garage/search",
            json={**body, "filters": {"metadata": only_2024}},
            headers=admin,
        ).json()["results"]
        everyone = client.post("/v1/collections/garage/search", json=body, headers=admin)
    assert [r["document_id"] for r in filtered] == ["tires.md"]
    assert {r["document_id"] for r in everyone.json()["results"]} == {"tires.md", "brakes.md"}
    question = {"collection": "garage", **body}
    with serving(cli_env(clean_env, dsn, embedder)) as base:
        async with http_session(f"{base}/mcp", searcher) as session:
            found = _result(await session.call_tool("search", question))
            assert [(r["document_id"], r["score"]) for r in found["results"]] == [
                (r["document_id"], r["score"]) for r in filtered
            ]
            answered = _result(await session.call_tool("answer", {**question, "threshold": 0}))
            assert {s["result"]["document_id"] for s in answered["sources"]} == {"tires.md"}
            listed = _result(await session.call_tool("list_collections", {}))
            assert [c["name"] for c in listed["collections"]] == ["garage"]
            assert "may not reach the collection 'shed'" in _error(
                await session.call_tool("search", {**question, "collection": "shed"})
            )
            assert "may not take the action documents:read" in _error(
                await session.call_tool(
                    "get_document", {"collection": "garage", "document_id": "tires.md"}
                )
            )
        async with http_session(f"{base}/mcp", reader) as session:

            async def read(document_id: str) -> Any:
                arguments = {"collection": "garage", "document_id": document_id}
                return await session.call_tool("get_document", arguments)

            assert _result(await read("tires.md"))["id"] == "tires.md"
            # Outside the filter a document does not exist, as one nobody stored.
            assert _error(await read("brakes.md")) == (
                "document 'brakes.md' does not exist in 'garage'"
            )
