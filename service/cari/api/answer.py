"""POST /v1/collections/{collection}/answer (JSON or SSE) and GET …/tool (the search as a tool)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

import msgspec
import psycopg
from litestar import Request, get, post
from litestar.di import NamedDependency
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import Example
from litestar.params import Body
from litestar.response import Response, ServerSentEvent, ServerSentEventMessage

import cari.collection
from cari.answer.service import Answerer, PreparedAnswer
from cari.api.auth import requires
from cari.api.consistency import READS_ONLY, ConsistencyToken, token
from cari.api.openapi import AnswerOperation, CollectionName, V1Operation
from cari.api.problems import responses
from cari.api.state import AppState
from cari.schema.answer import AnswerRequest, AnswerResponse
from cari.schema.tool import Tool
from cari.search import tool as search_tool

Conn = NamedDependency[psycopg.AsyncConnection[Any]]
EVENT_STREAM = "text/event-stream"

QUESTION = Example(summary="A question", value={"query": "berapa cicilan honda civic?"})


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
    operation_id="answerQuestion",
    # The JSON answer; AnswerOperation adds the event stream.
    responses={
        200: ResponseSpec(AnswerResponse, description="The answer", generate_examples=False),
        **responses(400, 404, 413, 422, 503),
    },
    operation_class=AnswerOperation,
    opt={**READS_ONLY, **requires("search")},
)
async def answer(
    state: AppState,
    request: Request[Any, Any, Any],
    collection: CollectionName,
    data: Annotated[AnswerRequest, Body(examples=[QUESTION])],
    consistency: ConsistencyToken = None,
) -> Response[Any]:
    answerer = state.runtime.answerer
    prepared = await answerer.prepare(collection, data, token=token(consistency))
    if data.stream or EVENT_STREAM in request.headers.get("accept", ""):
        return ServerSentEvent(_messages(answerer, prepared))
    return Response(await answerer.answer(prepared))


async def _messages(
    answerer: Answerer, prepared: PreparedAnswer
) -> AsyncIterator[ServerSentEventMessage]:
    async for event in answerer.events(prepared):
        yield ServerSentEventMessage(
            event=event.name, data=msgspec.json.encode(event.data).decode()
        )


@get(
    "/collections/{collection:str}/tool",
    summary="The collection's search as an LLM tool (OpenAI function schema)",
    tags=["answer"],
    operation_id="getSearchTool",
    opt=requires("search"),
    responses=responses(404, 422, 503),
    operation_class=V1Operation,
)
async def tool(conn: Conn, collection: CollectionName) -> Tool:
    return msgspec.convert(
        search_tool.definition(await cari.collection.get(conn, collection)), Tool
    )
