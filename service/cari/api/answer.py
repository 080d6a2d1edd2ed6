"""POST /v1/collections/{collection}/answer (JSON or SSE) and GET …/tool (the search as a tool)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import psycopg
from litestar import Request, get, post
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody
from litestar.response import Response, ServerSentEvent, ServerSentEventMessage

from cari import collection as collections
from cari.answer.service import Answerer, AnswerRequest, Prepared
from cari.search import tool as search_tool

Conn = NamedDependency[psycopg.AsyncConnection[Any]]
EVENT_STREAM = "text/event-stream"


@post(
    "/collections/{collection:str}/answer",
    summary="Answer a question from a collection, citing its sources",
    description=(
        "Searches (and reranks, when a reranker is configured), numbers the sources [1]..[n] "
        "and answers with an LLM when one is configured, else with the most relevant sentences "
        "of the sources; every claim cites its source, and a citation to a number that is no "
        "source is removed. Nothing relevant: the collection's no-information sentence, no LLM "
        "call. With `Accept: text/event-stream` or `stream: true` the answer streams as SSE "
        "events search_complete, llm_chunk, citations, metadata, done (or error)."
    ),
    status_code=200,
    tags=["answer"],
)
async def answer(
    state: State, request: Request[Any, Any, Any], collection: FromPath[str],
    data: JSONBody[AnswerRequest],
) -> Response[Any]:  # fmt: skip
    answerer: Answerer = state.answerer
    prepared = await answerer.prepare(collection, data)
    if data.stream or EVENT_STREAM in request.headers.get("accept", ""):
        return ServerSentEvent(_messages(answerer, prepared))
    return Response(await answerer.answer(prepared))


async def _messages(
    answerer: Answerer, prepared: Prepared
) -> AsyncIterator[ServerSentEventMessage]:
    async for event in answerer.events(prepared):
        yield ServerSentEventMessage(event=event.name, data=json.dumps(event.data))


@get(
    "/collections/{collection:str}/tool",
    summary="The collection's search as an LLM tool (OpenAI function schema)",
    tags=["answer"],
)
async def tool(conn: Conn, collection: FromPath[str]) -> dict[str, Any]:
    return search_tool.definition(await collections.get(conn, collection))
