"""Keyword retrieval: Okapi BM25 computed in PostgreSQL over the `postings` table.

`search_keyword.sql` reads every posting of the query's lexemes and sums them per chunk: exact
BM25. (A threshold algorithm over impact-ordered postings was measured slower at 100k chunks:
completing its candidates by index probes cost more than reading the lists; docs/bm25.md.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from cari.queries import query
from cari.search.fusion import Candidate


@dataclass(frozen=True, slots=True)
class KeywordResult:
    candidates: list[Candidate]
    postings_read: int


async def search(
    conn: psycopg.AsyncConnection[Any],
    collection_id: int,
    text: str,
    *,
    candidates: int,
    filters: sql.Composable,
    params: dict[str, Any],
) -> KeywordResult:
    """The best `candidates` chunks by BM25, with their scores."""
    where = (
        sql.SQL("WHERE EXISTS (SELECT FROM chunks AS c WHERE c.id = heads.chunk_id{})").format(
            filters
        )
        if filters != sql.SQL("")
        else filters
    )
    statement = sql.SQL(query("search_keyword")).format(filters=where)
    cur = await conn.execute(
        statement,
        {**params, "collection_id": collection_id, "query": text, "candidates": candidates},
    )
    rows = await cur.fetchall()
    found = [Candidate(int(r[0]), float(r[1])) for r in rows]
    return KeywordResult(found, int(rows[0][2]) if rows else 0)
