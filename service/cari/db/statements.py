"""The statements a search ran, ready to paste into `psql` (`cari search --sql`).

Every pooled connection's cursors are `RecordingCursor`s: inside `recording()`, each statement
they execute is kept with its parameters (one context-variable lookup otherwise). `for_psql`
renders one with its parameters filled in as literals (psycopg's `ClientCursor.mogrify`), so
`EXPLAIN (ANALYZE, BUFFERS)` of what Cari ran is one paste away.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from cari.db.queries import query

# The named statements (sql/) that retrieve a search's candidates, in the order shown: the
# question's lexemes first, which the keyword statement takes as parameters.
SEARCH_STATEMENTS = ("query_lexemes", "search_keyword", "search_keyword_blocks", "search_vector")


@dataclass(frozen=True, slots=True)
class Ran:
    """A statement as executed: its text (a template filled in) and its parameters."""

    statement: str | bytes | sql.Composable
    params: Mapping[str, Any] | None


_ran: ContextVar[list[Ran] | None] = ContextVar("cari_statements_ran", default=None)


class RecordingCursor(psycopg.AsyncCursor[Any]):
    """A cursor that keeps what it executes while `recording()` is on."""

    async def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        if (ran := _ran.get()) is not None and (params is None or isinstance(params, Mapping)):
            ran.append(Ran(query, params))
        return await super().execute(query, params, **kwargs)


@contextmanager
def recording() -> Iterator[list[Ran]]:
    """The statements executed in this context (and the tasks it starts) until it exits."""
    ran: list[Ran] = []
    token = _ran.set(ran)
    try:
        yield ran
    finally:
        _ran.reset(token)


def named(ran: Ran, conn: psycopg.AsyncConnection[Any]) -> str | None:
    """Which of `SEARCH_STATEMENTS` this is (the file's first line opens it), if any."""
    text = _text(ran.statement, conn)
    for name in SEARCH_STATEMENTS:
        if text.startswith(query(name).splitlines()[0] + "\n"):
            return name
    return None


def for_psql(ran: Ran, conn: psycopg.AsyncConnection[Any]) -> str:
    """The statement with its parameters as literals, ending in `;` (`conn` adapts them as the
    pool's connections do: vectors too)."""
    rendered = psycopg.AsyncClientCursor(conn).mogrify(_text(ran.statement, conn), ran.params)
    return rendered.rstrip().rstrip(";") + ";"


def _text(statement: str | bytes | sql.Composable, conn: psycopg.AsyncConnection[Any]) -> str:
    if isinstance(statement, sql.Composable):
        return statement.as_string(conn)
    return statement.decode() if isinstance(statement, bytes) else statement
