"""Keyword retrieval: exact Okapi BM25 in PostgreSQL, by one of two engines.

- `cari_bm25` (the extension, when the database has it): `search_keyword_blocks.sql` walks the
  packed posting blocks in C with block-max pruning and sums the few postings written since the
  last fold in SQL.
- `sql` (the fallback): `search_keyword.sql` reads every posting of the query's lexemes from
  the `postings` table and sums them per chunk. It is also the oracle the tests compare the
  extension with. (A threshold algorithm over impact-ordered postings was measured slower
  than it at 100k chunks; docs/bm25.md.)

When the walk meets a damaged block (SQLSTATE data_corrupted), the search is answered by
`search_keyword_chunks.sql`, the same scores from the chunks' own tsvectors, and the damaged
rows of the question's lexemes are named in the result (`cari.db.keyword_damage`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

import psycopg
from psycopg import sql

from cari.db import keyword_damage
from cari.db.keyword_damage import Damage, Damaged, DamagedBlock
from cari.db.queries import fragment, query
from cari.observability import metrics
from cari.search import lexemes
from cari.search.fusion import Candidate
from cari.search.lexemes import Lexemes

log = logging.getLogger(__name__)

Engine = Literal["sql", "cari_bm25"]
# The statements: each engine's, and the chunks' own when a block is damaged.
Statement = Literal["sql", "cari_bm25", "chunks"]


@dataclass(frozen=True, slots=True)
class KeywordResult:
    candidates: list[Candidate]
    postings_read: int
    lexemes: Lexemes  # what was looked for: the relevance evidence and highlights take them
    damaged: tuple[DamagedBlock, ...] = ()  # met by the walk: answered from the chunks instead
    # What a chunk holding every term very often would score (0 when nothing matched): how
    # strong the best match is, fusion.weighed reads against it.
    ceiling: float = 0.0


async def search(
    conn: psycopg.AsyncConnection[Any],
    collection_id: int,
    text: str,
    *,
    candidates: int,
    filters: sql.Composable,
    params: dict[str, Any],
    engine: Statement,
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
    engine: Statement,
) -> KeywordResult:
    """The best `candidates` chunks by BM25 for a question analysed already (`asked`). On a
    connection in autocommit: a damaged block's error ends only its own statement."""
    values = {
        **params,
        **asked.params(),
        "collection_id": collection_id,
        "candidates": candidates,
    }
    damaged: tuple[DamagedBlock, ...] = ()
    try:
        cur = await conn.execute(keyword_statement(engine, filters), values)
    except psycopg.errors.DataCorrupted:
        if engine != "cari_bm25":
            raise
        found = await keyword_damage.find(conn, collection_id, sorted(set(asked.lexemes)))
        # A row of another lexeme (the walk reads only the question's) cannot be what failed;
        # none found: the damage is elsewhere in what the walk read, named as unknown.
        damaged = tuple(found) or (DamagedBlock("?", 0, "the walk failed; no row named"),)
        cur = await conn.execute(keyword_statement("chunks", filters), values)
    rows = await cur.fetchall()
    found_chunks = [Candidate(int(r[0]), float(r[1])) for r in rows]
    if not rows:
        return KeywordResult(found_chunks, 0, asked, damaged)
    return KeywordResult(found_chunks, int(rows[0][2]), asked, damaged, float(rows[0][3]))


def met_damage(damage: Damage, found: Damaged) -> None:
    """A search met damaged blocks: remembered for /readyz, counted, logged with the cure."""
    damage.record(found)
    metrics.KEYWORD_INDEX_DAMAGE.labels("search").inc()
    log.error(
        "the keyword index of '%s' has damaged blocks; its keyword searches read the chunks' "
        "own words instead until `cari bm25 repair -c %s`: %s",
        found.collection,
        found.collection,
        "; ".join(map(str, found.blocks)),
    )


def damage_warning(collection: str, blocks: Sequence[DamagedBlock]) -> str:
    """What a search's response says when its keyword search met damaged blocks."""
    return (
        f"the keyword index of '{collection}' has a damaged block ({blocks[0]}): keyword "
        "results were read from the chunks' own words instead (the same scores, slower); run "
        f"`cari bm25 repair -c {collection}`"
    )


NO_FILTERS = sql.SQL("")
# A term's postings (`t.lexeme`), in the fragment all statements share: its posting rows; the
# chunk delta's (the CTE `unfolded` of search_keyword_blocks.sql) beside them; or the chunks'
# own (search_keyword_chunks.sql's `unfolded`) alone.
POSTING_ROWS = (
    "\n            SELECT o.chunk_id, o.tf_title, o.tf_body, o.len_title, o.len_body"
    "\n            FROM postings AS o"
    "\n            WHERE o.collection_id = %(collection_id)s AND o.lexeme = t.lexeme"
)
UNFOLDED = (
    "\n            SELECT u.chunk_id, u.tf_title, u.tf_body, u.len_title, u.len_body"
    "\n            FROM unfolded AS u WHERE u.lexeme = t.lexeme"
)
POSTINGS: dict[Statement, sql.SQL] = {
    "sql": sql.SQL(POSTING_ROWS),
    "cari_bm25": sql.SQL(POSTING_ROWS + "\n            UNION ALL" + UNFOLDED),
    "chunks": sql.SQL(UNFOLDED),
}


def keyword_statement(engine: Statement, filters: sql.Composable = NO_FILTERS) -> sql.Composed:
    """The statement, composed: `search_keyword.sql`, `search_keyword_blocks.sql` or
    `search_keyword_chunks.sql` with the fragments they share (sql/fragments/) and `filters`
    (from cari.search.filters; empty: none). Its parameters: `collection_id`, `candidates`,
    the question's lexemes (`Lexemes.params`) and the filters'."""
    if filters == NO_FILTERS:
        return _unfiltered(engine)
    return _composed(engine, filters)


@cache  # most searches have no filter: composed once per statement, not once per search
def _unfiltered(engine: Statement) -> sql.Composed:
    return _composed(engine, NO_FILTERS)


def _composed(engine: Statement, filters: sql.Composable) -> sql.Composed:
    filtered = filters != NO_FILTERS
    where = (
        sql.SQL("WHERE EXISTS (SELECT FROM chunks AS c WHERE c.id = heads.chunk_id{})").format(
            filters
        )
        if filtered
        else filters
    )
    shared = {
        "terms": sql.SQL(fragment("search_keyword_terms")),
        "summed": sql.SQL(fragment("search_keyword_summed")).format(
            filters=where, postings=POSTINGS[engine]
        ),
    }
    if engine == "sql":
        return sql.SQL(query("search_keyword")).format(**shared)
    if engine == "chunks":
        return sql.SQL(query("search_keyword_chunks")).format(**shared)
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
