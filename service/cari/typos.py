"""Typo tolerance outside keyword search: which unknown query words it corrects, as `explain`
shows them, and the question respelled for the vector side to embed.

The corrections themselves happen in SQL (`query_corrected`, migrations 0011, 0016 and 0019),
where keyword search, relevance evidence and highlights all read them; `query_respelled`
(migration 0021) gives the same choice as words.
"""

from __future__ import annotations

import re
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


SUSPECT_LETTERS = 4  # a word typed shorter is never corrected (migration 0016's MIN_LENGTH)
_WORD = re.compile(r"[^\W\d_]+")  # a run of letters, as `query_corrected` splits the typed words


async def common_words(conn: Conn) -> frozenset[str]:
    """`typo_words`: the common words no correction touches (only a migration writes them)."""
    cur = await conn.execute(query("typos_common_words"))
    return frozenset(word for (word,) in await cur.fetchall())


def may_respell(text: str, common: frozenset[str]) -> bool:
    """Whether `respelled` can change `text`: only a word of `SUSPECT_LETTERS` letters or more
    that is no common word is corrected, so a question without one needs no round trip (124 of
    `bench.search`'s 200 real questions; the round trip cost ~8 % of hybrid search's throughput
    at 100k chunks when made for every question)."""
    return any(
        len(word) >= SUSPECT_LETTERS and word not in common for word in _WORD.findall(text.lower())
    )


async def respelled(conn: Conn, collection_id: int, text: str) -> str:
    """`text` with each misspelled word that keyword search reads as a common word replaced by
    that word (first letter upper case where it was typed so); `text` itself when there is none
    or the collection corrects no typos."""
    cur = await conn.execute(
        query("typos_respelled"), {"collection_id": collection_id, "query": text}
    )
    words: dict[str, str] = dict(await cur.fetchall())

    def spelled(found: re.Match[str]) -> str:
        # A word as SQL splits them (a whole run of letters), compared in lower case.
        word = words.get(found[0].lower())
        if word is None:
            return found[0]
        return word.capitalize() if found[0][0].isupper() else word

    return _WORD.sub(spelled, text) if words else text
