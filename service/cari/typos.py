"""Typo tolerance outside keyword search: which unknown query words it corrects, as `explain`
shows them, and the question respelled for the vector side to embed.

The corrections themselves happen in SQL (`query_corrected`, migrations 0011, 0016 and 0019),
where keyword search, relevance evidence and highlights all read them; its rows of `typed` and
`word` (migration 0023) give the same choice as words.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
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
    that is no common word is corrected, so the embedding of a question without one need not
    wait for the question's analysis (124 of `bench.search`'s 200 real questions)."""
    return any(
        len(word) >= SUSPECT_LETTERS and word not in common for word in _WORD.findall(text.lower())
    )


def respelled(text: str, words: Iterable[tuple[str, str]]) -> str:
    """`text` with each misspelled word that keyword search reads as a common word replaced by
    that word (first letter upper case where it was typed so); `words`: each word as typed
    (lower case) and its common word (`Lexemes.respelled`)."""
    common = dict(words)

    def spelled(found: re.Match[str]) -> str:
        # A word as SQL splits them (a whole run of letters), compared in lower case.
        word = common.get(found[0].lower())
        if word is None:
            return found[0]
        return word.capitalize() if found[0][0].isupper() else word

    return _WORD.sub(spelled, text) if common else text
