"""Keyword retrieval: exact Okapi BM25 in PostgreSQL, by one of two engines.

- `cari_bm25` (the extension, when the database has it): `search_keyword_blocks.sql` walks the
  packed posting blocks in C with block-max pruning and sums the few postings written since the
  last fold in SQL.
- `sql` (the fallback): `search_keyword.sql` reads every posting of the query's lexemes from
  the `postings` table and sums them per chunk. It is also the oracle the tests compare the
  extension with. (A threshold algorithm over impact-ordered postings was measured slower
  than it at 100k chunks; docs/bm25.md.)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

import psycopg
from psycopg import sql

from cari.db.queries import fragment, query
from cari.search import lexemes
from cari.search.fusion import Candidate
from cari.search.lexemes import Lexemes

Engine = Literal["sql", "cari_bm25"]


@dataclass(frozen=True, slots=True)
class KeywordResult:
    candidates: list[Candidate]
    postings_read: int
    lexemes: Lexemes  # what was looked for: the relevance evidence and highlights take them


async def search(
    conn: psycopg.AsyncConnection[Any],
    collection_id: int,
    text: str,
    *,
    candidates: int,
    filters: sql.Composable,
    params: dict[str, Any],
    engine: Engine,
) -> KeywordResult:
    """The best `candidates` chunks by BM25 for `text`, with their scores, and its lexemes."""
    asked = await lexemes.analyse(conn, collection_id, text)
    return await search_lexemes(
        conn,
        collection_id,
        asked,
        candidates=candidates,
        filters=filters,
        params=params,
        engine=engine,
    )


async def search_lexemes(
    conn: psycopg.AsyncConnection[Any],
    collection_id: int,
    asked: Lexemes,
    *,
    candidates: int,
    filters: sql.Composable,
    params: dict[str, Any],
    engine: Engine,
) -> KeywordResult:
    """The best `candidates` chunks by BM25 for a question analysed already (`asked`)."""
    cur = await conn.execute(
        keyword_statement(engine, filters),
        {
            **params,
            **asked.params(),
            "collection_id": collection_id,
            "candidates": candidates,
        },
    )
    rows = await cur.fetchall()
    found = [Candidate(int(r[0]), float(r[1])) for r in rows]
    return KeywordResult(found, int(rows[0][2]) if rows else 0, asked)


NO_FILTERS = sql.SQL("")
# The chunk delta's postings (the CTE `unfolded` of search_keyword_blocks.sql) beside a
# lexeme's posting rows, in the fragment both statements share.
UNFOLDED = sql.SQL(
    "\n            UNION ALL"
    "\n            SELECT u.chunk_id, u.tf_title, u.tf_body, u.len_title, u.len_body"
    "\n            FROM unfolded AS u WHERE u.lexeme = t.lexeme"
)


def keyword_statement(engine: Engine, filters: sql.Composable = NO_FILTERS) -> sql.Composed:
    """The engine's keyword statement, composed: `search_keyword.sql` or
    `search_keyword_blocks.sql` with the fragments they share (sql/fragments/) and `filters`
    (from cari.search.filters; empty: none). Its parameters: `collection_id`, `candidates`,
    the question's lexemes (`Lexemes.params`) and the filters'."""
    if filters == NO_FILTERS:
        return _unfiltered(engine)
    return _composed(engine, filters)


@cache  # most searches have no filter: composed once per engine, not once per search
def _unfiltered(engine: Engine) -> sql.Composed:
    return _composed(engine, NO_FILTERS)


def _composed(engine: Engine, filters: sql.Composable) -> sql.Composed:
    filtered = filters != NO_FILTERS
    where = (
        sql.SQL("WHERE EXISTS (SELECT FROM chunks AS c WHERE c.id = heads.chunk_id{})").format(
            filters
        )
        if filtered
        else filters
    )
    summed = sql.SQL(fragment("search_keyword_summed"))
    terms = sql.SQL(fragment("search_keyword_terms"))
    if engine == "sql":
        return sql.SQL(query("search_keyword")).format(
            terms=terms, summed=summed.format(filters=where, unfolded=NO_FILTERS)
        )
    shared = {"terms": terms, "summed": summed.format(filters=where, unfolded=UNFOLDED)}
    # The ids the filters allow, computed once, for the walker to skip the rest.
    allowed = (
        sql.SQL(
            "ARRAY(SELECT c.id FROM chunks AS c"
            " WHERE c.collection_id = %(collection_id)s{} ORDER BY c.id)"
        ).format(filters)
        if filtered
        else sql.SQL("NULL::bigint[]")
    )
    return sql.SQL(query("search_keyword_blocks")).format(allowed=allowed, **shared)
