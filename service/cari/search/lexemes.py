"""A question's lexemes, read once per search and handed to each statement that weighs them.

Keyword search, the relevance evidence and the highlights look for the same lexemes: the
question analysed in each language of the collection, stop words dropped, fired synonym rules
and typo corrections included (`query_lexemes.sql`). Each analysed the question itself until
they took it as parameters; the analysis is 0.5 to 0.8 ms of PostgreSQL for a question of ~15
words. The same analysis gives the words the vector side respells (`Lexemes.respelled`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from cari.db.queries import query


@dataclass(frozen=True, slots=True)
class Lexemes:
    """The question's lexemes, one row per language and lexeme, as parallel lists (the arrays
    the statements unnest): the language's text-search configuration (oid), the lexeme, how
    often the question says it, its synonym group and alternative (None: a plain word) and its
    factor (a typo correction weighs less). `respelled`: each misspelled word as typed (lower
    case) and the common word keyword search reads it as, for the vector side to embed."""

    languages: tuple[int, ...] = ()
    lexemes: tuple[str, ...] = ()
    qtfs: tuple[int, ...] = ()
    groups: tuple[int | None, ...] = ()
    alts: tuple[int | None, ...] = ()
    factors: tuple[float, ...] = ()
    respelled: tuple[tuple[str, str], ...] = ()

    def params(self) -> dict[str, list[Any]]:
        """The statements' parameters: `languages`, `lexemes`, `qtfs`, `groups`, `alts`,
        `factors`."""
        return {
            "languages": list(self.languages),
            "lexemes": list(self.lexemes),
            "qtfs": list(self.qtfs),
            "groups": list(self.groups),
            "alts": list(self.alts),
            "factors": list(self.factors),
        }


def words(each: Iterable[Lexemes]) -> dict[str, list[Any]]:
    """The lexemes each language looks for in any of `each` (a question's sub-queries), each
    once, as the highlights take them: `languages` and `lexemes`, paired."""
    pairs = sorted({pair for x in each for pair in zip(x.languages, x.lexemes, strict=True)})
    return {"languages": [p[0] for p in pairs], "lexemes": [p[1] for p in pairs]}


async def analyse(conn: psycopg.AsyncConnection[Any], collection_id: int, text: str) -> Lexemes:
    """The lexemes of `text` in the collection's languages."""
    cur = await conn.execute(
        query("query_lexemes"), {"collection_id": collection_id, "query": text}
    )
    return from_rows(await cur.fetchall())


def from_rows(rows: Sequence[Sequence[Any]]) -> Lexemes:
    """The lexemes from the rows of `query_lexemes.sql` (a row without a lexeme respells)."""
    respelled = tuple((r[6], r[7]) for r in rows if r[1] is None)
    rows = [r for r in rows if r[1] is not None]
    if not rows:
        return Lexemes(respelled=respelled)
    languages, lexemes, qtfs, groups, alts, factors, _, _ = zip(*rows, strict=True)
    return Lexemes(
        tuple(int(x) for x in languages),
        tuple(lexemes),
        tuple(int(x) for x in qtfs),
        tuple(groups),
        tuple(alts),
        tuple(float(x) for x in factors),
        respelled,
    )
