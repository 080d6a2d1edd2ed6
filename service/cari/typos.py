"""Typo tolerance, as `explain` shows it: which unknown query words keyword search corrects.

The corrections themselves happen in SQL (`query_corrected`, migrations 0011 and 0016), where
keyword search, relevance evidence and highlights all read them.
"""

from __future__ import annotations

from typing import Any

import psycopg

from cari.db.queries import query

Conn = psycopg.AsyncConnection[Any]


async def corrections(conn: Conn, collection_id: int, text: str) -> list[dict[str, Any]]:
    """Each correction of the query, per language of the collection: the unknown lexeme, the
    known one searched instead and the share of an exact match's weight it gets."""
    cur = await conn.execute(
        query("typos_corrected"), {"collection_id": collection_id, "query": text}
    )
    return [
        {"word": word, "lexeme": lexeme, "language": language, "weight": round(factor, 4)}
        for word, lexeme, language, factor in await cur.fetchall()
    ]
