"""Cari's MCP server (the official `mcp` SDK's low-level `Server`) on a runtime, over stdio
(`cari mcp`) or streamable HTTP (`/mcp` in `cari serve`, sharing the app's runtime).

The low-level server is used because the tools' schemas are Cari's own, derived from its
request and response structs (`cari.mcp.tools`), not from Python signatures. A tool's failure
that the caller can act on (an unknown collection, a bad filter, a busy database) is a tool
result with `isError` and Cari's message, which the agent's model reads; an unknown tool is a
protocol error, as the specification asks.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import mcp.types as types
import msgspec
import psycopg
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from psycopg_pool import PoolTimeout

import cari
from cari.db import database as db
from cari.errors import CariError
from cari.keys import EVERY_COLLECTION, EVERYTHING, SCOPE_KEY, Access
from cari.mcp import tools
from cari.runtime import Runtime

log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "Cari searches knowledge bases (collections) with hybrid keyword and semantic search. "
    "Call list_collections to see what there is, search for passages, answer for a cited "
    "answer, and get_document to read a result's whole document."
)
STDIO = Access("cari mcp", None, EVERYTHING, (EVERY_COLLECTION,))
# Every tool only reads, and the same arguments give the same result while nothing is added.
READ_ONLY = types.ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)


def build(rt: Runtime) -> Server[Any]:
    """An MCP server whose tools work on `rt`."""

    async def list_tools(
        _ctx: ServerRequestContext[Any], _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=tool.name,
                    title=tool.title,
                    description=tool.description,
                    input_schema=tools.input_schema(tool),
                    output_schema=tools.output_schema(tool),
                    annotations=READ_ONLY,
                )
                for tool in tools.TOOLS.values()
            ]
        )

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        tool = tools.TOOLS.get(params.name)
        if tool is None:
            raise MCPError(types.INVALID_PARAMS, f"unknown tool '{params.name}'")
        try:
            result = await tools.call(rt, tool, params.arguments or {}, _access(ctx))
        except CariError as exc:
            return _error(exc.message)
        except (psycopg.OperationalError, PoolTimeout) as exc:
            # As the HTTP API says it; the driver's own text (hosts, the statement) goes to the
            # log.
            log.warning("database error in MCP tool %s: %s", tool.name, exc)
            return _error(db.failure(exc, rt.settings).message)
        except psycopg.DataError as exc:  # a value PostgreSQL refuses: the caller's input
            return _error(db.refused(exc, "arguments").message)
        structured = msgspec.to_builtins(result)
        return types.CallToolResult(
            # The same JSON as text, for clients that do not read structured content.
            content=[types.TextContent(text=msgspec.json.encode(structured).decode())],
            structured_content=structured,
        )

    return Server(
        "cari",
        version=cari.__version__,
        title="Cari",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _access(ctx: ServerRequestContext[Any]) -> Access:
    """What the caller may do. Over HTTP, what /mcp's guard found for the request's key
    (`cari.api.auth`), left in the request's scope: a request without it is a fault here, so
    it fails (`KeyError`) rather than opens. Over stdio, everything: the one who started
    `cari mcp` holds the database's URL already."""
    if ctx.request is None:
        return STDIO
    access: Access = ctx.request.scope[SCOPE_KEY]
    return access


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


async def serve_stdio(rt: Runtime) -> None:
    """Serve MCP on standard input and output until the client closes them."""
    server = build(rt)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


@asynccontextmanager
async def http_sessions(rt: Runtime) -> AsyncIterator[StreamableHTTPSessionManager]:
    """The streamable-HTTP transport on `rt`, running; its `handle_request` is an ASGI app.

    Stateless, with JSON responses: each POST is a whole exchange on a fresh transport, so no
    session is kept between requests (a client may reach any replica behind a load balancer)
    and no server-to-client stream is held open, which Cari's tools never need.
    """
    manager = StreamableHTTPSessionManager(build(rt), stateless=True, json_response=True)
    async with manager.run():
        yield manager
