"""Catalog retrieval for pricing and specs questions: keyword and vector candidates, merged and
ordered by how fully the query names each product."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from cari.catalog.store import financing_rates
from cari.concurrency import all_or_none
from cari.db.queries import query
from cari.db.vector_space import Space
from cari.schema.catalog import CatalogItem, FinancingRate

__all__ = ["CatalogHit", "FinancingRate", "financing_rates", "relevance", "search_catalog"]

CANDIDATES = 40  # per retriever: a catalog question names one product or a few
# Trimmed from the ends of words when looking for an exact SKU ("VLZ-15-AT?").
_PUNCTUATION = ".,;:!?()[]{}<>\"'`«»\u201c\u201d\u2018\u2019"
_ITEM_FIELDS = CatalogItem.__struct_fields__


@dataclass(frozen=True, slots=True)
class CatalogHit:
    item: CatalogItem
    relevance: float  # 0..1 absolute evidence that the query names this product
    keyword_rank: int | None
    vector_rank: int | None
    cosine: float | None


async def search_catalog(
    pool: AsyncConnectionPool,
    collection_id: int,
    text: str,
    vector: np.ndarray | None,
    space: Space | None,
    limit: int,
) -> list[CatalogHit]:
    """Up to `limit` items, the most fully named first (then by keyword rank, vector rank).

    Keyword and vector candidates are read in parallel, each on its own connection; without
    `vector` (of `space`) only the keyword side runs. The caller applies a relevance threshold.
    """
    async with pool.connection() as conn:
        cur = await conn.execute(
            query("catalog_search_probe"), {"collection_id": collection_id, "text": text}
        )
        probe = await cur.fetchone()
    if probe is None or not probe[2]:
        return []
    lexemes: list[str] = list(probe[0])
    words = query_words(text)
    params: dict[str, Any] = {
        "collection_id": collection_id,
        "query": probe[1],
        # Exact SKU lookups go through the unique index: try the common spellings.
        "words": sorted({v for w in words for v in (w, w.upper(), w.lower())}),
        "vector": vector,
        "candidates": max(limit, CANDIDATES),
    }
    nearest: list[dict[str, Any]] = []
    if vector is None or space is None:
        keyword = await _keyword_rows(pool, params)
    else:
        keyword, nearest = await all_or_none(
            _keyword_rows(pool, params), _vector_rows(pool, space, params)
        )
    hits = _merge(keyword, nearest, set(lexemes), {w.casefold() for w in words})
    return hits[:limit]


def query_words(text: str) -> set[str]:
    """The query's whitespace-separated words without surrounding punctuation."""
    return {word.strip(_PUNCTUATION) for word in text.split()} - {""}


def relevance(
    sku: str, name_lexemes: Iterable[str], query_lexemes: set[str], words: set[str]
) -> float:
    """1.0 when the query holds the exact SKU (`words` case-folded); otherwise the share of the
    name's lexemes found among the query's: "honda veloz" names "Honda Veloz" fully and
    "Honda Civic" half."""
    if sku.casefold() in words:
        return 1.0
    name = set(name_lexemes)
    return len(name & query_lexemes) / len(name) if name else 0.0


async def _keyword_rows(pool: AsyncConnectionPool, params: dict[str, Any]) -> list[dict[str, Any]]:
    async with pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query("catalog_search_keyword"), params)
        return await cur.fetchall()


async def _vector_rows(
    pool: AsyncConnectionPool, space: Space, params: dict[str, Any]
) -> list[dict[str, Any]]:
    # Iterative scans are the pool's session setting (cari.runtime.make_pool).
    async with pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        statement = space.statement("catalog_search_vector", alias=sql.Identifier("i"))
        await cur.execute(statement, params, prepare=False)  # see Space.statement
        return await cur.fetchall()


def _merge(
    keyword: Sequence[dict[str, Any]],
    nearest: Sequence[dict[str, Any]],
    query_lexemes: set[str],
    words: set[str],
) -> list[CatalogHit]:
    """One hit per item, with its rank in each list it appears in."""
    rows: dict[str, dict[str, Any]] = {}
    for row in keyword:
        rows[row["sku"]] = {**row, "vector_rank": None, "cosine": None}
    for rank, row in enumerate(nearest, 1):
        merged = rows.setdefault(row["sku"], {**row, "keyword_rank": None})
        merged.update(vector_rank=rank, cosine=float(row["cosine"]))
    hits = [
        CatalogHit(
            item=CatalogItem(**{field: row[field] for field in _ITEM_FIELDS}),
            relevance=relevance(row["sku"], row["name_lexemes"], query_lexemes, words),
            keyword_rank=None if row["keyword_rank"] is None else int(row["keyword_rank"]),
            vector_rank=row["vector_rank"],
            cosine=row["cosine"],
        )
        for row in rows.values()
    ]
    hits.sort(
        key=lambda hit: (
            -hit.relevance,
            math.inf if hit.keyword_rank is None else hit.keyword_rank,
            math.inf if hit.vector_rank is None else hit.vector_rank,
            hit.item.sku,
        )
    )
    return hits
