"""Keyword retrieval: Okapi BM25 computed in PostgreSQL over the `postings` table.

`search_keyword.sql` reads each query lexeme's postings best impact first, `depth` of them, and
says whether that proves the top `exact` results. When it cannot (many common lexemes, or
filters that reject the best chunks), the same statement runs again deeper, and finally over
every posting, which is always exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from cari.queries import query
from cari.search.fusion import Candidate

# Postings read per lexeme on each pass; None reads them all.
DEPTHS: tuple[int | None, ...] = (256, 4096, None)


@dataclass(frozen=True, slots=True)
class KeywordResult:
    candidates: list[Candidate]
    passes: int
    depth: int | None  # of the pass that proved the result


async def search(
    conn: psycopg.AsyncConnection[Any],
    collection_id: int,
    text: str,
    *,
    exact: int,
    candidates: int,
    filters: sql.Composable,
    params: dict[str, Any],
) -> KeywordResult:
    """The best `candidates` chunks by BM25, the first `exact` of them provably the true top."""
    where = (
        sql.SQL("WHERE EXISTS (SELECT FROM chunks AS c WHERE c.id = heads.chunk_id{})").format(
            filters
        )
        if filters != sql.SQL("")
        else filters
    )
    statement = sql.SQL(query("search_keyword")).format(filters=where)
    values = {
        **params,
        "collection_id": collection_id,
        "query": text,
        "exact": min(exact, candidates),
        "candidates": candidates,
    }
    for passes, depth in enumerate(DEPTHS, start=1):
        cur = await conn.execute(statement, {**values, "depth": depth})
        rows = await cur.fetchall()
        if depth is None or rows[0][2]:
            found = [Candidate(int(r[0]), float(r[1])) for r in rows if r[0] is not None]
            return KeywordResult(found, passes, depth)
    raise AssertionError("the last pass reads every posting, so it is always proven")
