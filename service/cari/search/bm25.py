"""Keyword retrieval: Okapi BM25 computed in PostgreSQL over the `postings` table.

`search_keyword.sql` computes the exact BM25 top in one statement. It sums every posting of the
query lexemes, unless one lexeme has many postings (more than `SCAN_LIMIT` in all) and the others
few: then the best `DEPTH` postings of each lexeme give a score threshold, which decides how much
further down each lexeme's postings (ordered by impact) must be read. `DEPTH = None` makes the
pruned plan read every posting at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from cari.queries import query
from cari.search.fusion import Candidate

DEPTH: int | None = 256  # postings per lexeme read first when pruning
SCAN_LIMIT = 20_000  # postings of the query's lexemes that are simply summed
PRUNE: bool | None = None  # None: the statement chooses; True / False force a plan


@dataclass(frozen=True, slots=True)
class KeywordResult:
    candidates: list[Candidate]
    postings_read: int


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
    """The best `candidates` chunks by BM25, the first `exact` of them exactly BM25's top."""
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
        {
            **params,
            "collection_id": collection_id,
            "query": text,
            "exact": min(exact, candidates),
            "candidates": candidates,
            "depth": DEPTH,
            "scan_limit": SCAN_LIMIT,
            "prune": PRUNE,
        },
    )
    rows = await cur.fetchall()
    found = [Candidate(int(r[0]), float(r[1])) for r in rows]
    return KeywordResult(found, int(rows[0][2]) if rows else 0)
