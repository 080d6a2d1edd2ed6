"""The tools Cari offers AI agents over MCP: search, answer, list_collections, get_document.

A tool takes the fields of the request struct the HTTP API validates (`SearchRequest`,
`AnswerRequest`), plus the collection the HTTP API takes from the path, and answers with the
HTTP API's response struct: its input schema is derived from the one struct
(`cari.search.tool.arguments`) and its output schema from the other, so the two edges cannot
disagree on a field. Each tool calls the core the HTTP route calls.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import msgspec

import cari.collection
from cari.db.replicas import Node
from cari.errors import InvalidInput
from cari.ingest import stored
from cari.keys import EVERYTHING, Access
from cari.limits import DocumentId
from cari.runtime import Runtime
from cari.schema.answer import AnswerRequest, AnswerResponse
from cari.schema.collections import Collection, Name
from cari.schema.documents import Document
from cari.schema.search import SearchRequest, SearchResponse
from cari.search.filters import TENANT, compile_documents
from cari.search.tool import arguments


class GetDocument(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The arguments of `get_document` besides the collection."""

    document_id: DocumentId


class NoArguments(msgspec.Struct, forbid_unknown_fields=True):
    """The arguments of `list_collections`: none."""


class Collections(msgspec.Struct):
    collections: list[Collection]


# A key's filter reaches each tool's statements as the HTTP routes' does: as the tenant filter
# (`cari.search.filters.TENANT`) that every filter compiled while the tool runs includes.


async def _search(
    rt: Runtime, _access: Access, collection: str, request: SearchRequest
) -> SearchResponse:
    return await rt.searcher.search(collection, request)


async def _answer(
    rt: Runtime, _access: Access, collection: str, request: AnswerRequest
) -> AnswerResponse:
    return await rt.answerer.answer(await rt.answerer.prepare(collection, request))


async def _list_collections(
    rt: Runtime, access: Access, _collection: str, _request: NoArguments
) -> Collections:
    async def listed(node: Node) -> Collections:
        async with node.pool.connection() as conn:
            listed = await cari.collection.list_all(conn)
            return Collections(
                [cari.collection.named(c, rt.settings) for c in listed if access.reaches(c.name)]
            )

    return await rt.reads.run(None, listed)  # on a read replica, if there is one


async def _get_document(
    rt: Runtime, _access: Access, collection: str, request: GetDocument
) -> Document:
    async def read(node: Node) -> Document:
        async with node.pool.connection() as conn:
            visible = compile_documents(None, "metadata")  # the key's documents, no other
            return await stored.read(conn, collection, request.document_id, visible)

    return await rt.reads.run(None, read)


@dataclass(frozen=True, slots=True)
class MCPTool:
    """One MCP tool: its name and texts, its arguments' and result's structs, what it runs."""

    name: str
    title: str
    description: str
    request: type[msgspec.Struct]  # the arguments (but `collection`) are this struct's fields
    response: type[msgspec.Struct]
    run: Callable[[Runtime, Access, str, Any], Awaitable[msgspec.Struct]]
    # The actions of which a key needs one, as the HTTP route's (`cari.api.auth.requires`).
    actions: frozenset[str]
    collection: bool = True  # takes the collection to work on
    omit: frozenset[str] = frozenset()  # request fields that mean nothing to a tool's caller


TOOLS = {
    tool.name: tool
    for tool in (
        MCPTool(
            "search",
            "Search a collection",
            "Search a Cari collection (hybrid keyword and semantic search) for the passages, "
            "catalog items and computed installments most relevant to a question. Each result "
            "has an `id` to cite, a title, its `content`, a 0-1 `relevance` with its `band` "
            "(strong from 0.5, moderate from 0.3, weak below: likely not about the question) "
            "and, for a "
            "passage, the `document_id` it comes from (read it whole with get_document) and "
            "a `highlight`: the part around the question's words, HTML-escaped, the matches "
            "in <mark>. "
            "The top results come back ranked whatever their relevance unless a `threshold` "
            "is given: then those below it are dropped, and no results means the collection "
            "does not hold the answer. Unset arguments take the collection's defaults.",
            SearchRequest,
            SearchResponse,
            _search,
            frozenset({"search"}),
        ),
        MCPTool(
            "answer",
            "Answer a question, citing sources",
            "Answer a question from a Cari collection, citing its sources as [1], [2], ...: "
            "`answer` is the text, `citations` maps each number it cites to the source "
            "(document id, title, snippet) and `sources` lists every source it was written "
            "from. Written by the server's language model, or from the sources' most relevant "
            "sentences when none is configured; `no_information` is true when the collection "
            "holds nothing relevant.",
            AnswerRequest,
            AnswerResponse,
            _answer,
            frozenset({"search"}),
            omit=frozenset({"stream"}),  # a tool's result comes whole
        ),
        MCPTool(
            "list_collections",
            "List collections",
            "List the Cari collections (knowledge bases) there are to search, with their "
            "language and search defaults.",
            NoArguments,
            Collections,
            _list_collections,
            EVERYTHING,  # any key lists the collections it reaches, as GET /v1/collections
            collection=False,
        ),
        MCPTool(
            "get_document",
            "Read a document",
            "Read a document of a Cari collection by its id (a search result's "
            "`document_id`): its title, source, metadata and text, chunk by chunk in order.",
            GetDocument,
            Document,
            _get_document,
            frozenset({"documents:read"}),
        ),
    )
}

DESCRIPTIONS = {
    "collection": "The collection to work on (list_collections names them).",
    "query": "The question or keywords, in the user's own words.",
    "mode": "hybrid (default), keyword for exact codes and names, vector for meaning.",
    "top_k": "How many results at most.",
    "threshold": "Least relevance (0-1) a result needs; unset: a search cuts nothing (unless "
    "the collection sets a search threshold), an answer uses the collection's threshold.",
    "filters": 'Narrow the search: {"metadata": {"key": value | {"in": [...]} | '
    '{"gte": x, "lte": y}}, "document_ids": ["..."]}.',
    "document_id": "The document's id, as a search result's `document_id` gives it.",
}


@cache
def input_schema(tool: MCPTool) -> dict[str, Any]:
    """The JSON schema of the tool's arguments: the collection, then the request's fields.
    (Shared: not to be changed by callers.)"""
    fields, required = arguments(tool.request)
    properties: dict[str, dict[str, Any]] = {}
    if tool.collection:
        properties["collection"] = msgspec.json.schema(Name)
        required = ("collection", *required)
    properties.update({k: v for k, v in fields.items() if k not in tool.omit})
    return {
        "type": "object",
        "properties": {
            name: {**schema, "description": DESCRIPTIONS[name]} if name in DESCRIPTIONS else schema
            for name, schema in properties.items()
        },
        "required": list(required),
        "additionalProperties": False,
    }


@cache
def output_schema(tool: MCPTool) -> dict[str, Any]:
    """The JSON schema of the tool's structured result: the response struct's, its definition
    at the root (MCP wants an object there) beside the definitions it refers to."""
    schema = msgspec.json.schema(tool.response)
    definitions = schema["$defs"]
    return {**definitions[tool.response.__name__], "$defs": definitions}


async def call(rt: Runtime, tool: MCPTool, given: dict[str, Any], access: Access) -> msgspec.Struct:
    """Run `tool` with the arguments `given` for a caller who may do what `access` allows; a
    CariError says what is wrong with them, or what the key may not do."""
    access.check_action(tool.actions)
    for name in given:
        if name not in input_schema(tool)["properties"]:
            raise InvalidInput(name, f"is not an argument of {tool.name}")
    values = dict(given)
    collection = ""
    if tool.collection:
        if "collection" not in values:
            raise InvalidInput("collection", "is required")
        collection = _convert(values.pop("collection"), Name, "collection")
        access.check_reaches(collection)
    request = _convert(values, tool.request, "arguments")
    tenant = TENANT.set(access.filter)
    try:
        return await tool.run(rt, access, collection, request)
    finally:
        TENANT.reset(tenant)


def _convert(value: Any, type_: Any, what: str) -> Any:
    """`value` as `type_`, or InvalidInput naming the field as the HTTP API's 422 does (`what`
    when msgspec names none)."""
    try:
        return msgspec.convert(value, type_)
    except msgspec.ValidationError as exc:
        raise InvalidInput.from_msgspec(str(exc), what) from None
