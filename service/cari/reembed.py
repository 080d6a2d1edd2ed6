"""Moving a collection to another embedder without a moment of unsearchable vectors.

The new model's vectors fill `next_embedding` beside the old ones, in batches, while searches
and writes go on with the old model; once every chunk and catalog item has one, a single
transaction swaps them in and the collection names its new embedder and width
(sql/collection_switch_finish.sql). An interrupted move is resumed by running it again: what is
done stays done. Chunks written meanwhile are embedded on the next pass; one written after the
last pass is swapped in without a vector and filled in by the server's re-embedding.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
from psycopg_pool import AsyncConnectionPool

from cari.catalog.store import item_text
from cari.db.queries import query
from cari.embed import Embedder, Embedders
from cari.errors import ConfigError, InvalidInput, NotFound
from cari.ingest import store
from cari.schema.catalog import CatalogItemIn
from cari.settings import Settings

log = logging.getLogger(__name__)


async def switch_embedder(
    pool: AsyncConnectionPool,
    embedders: Embedders,
    settings: Settings,
    collection: str,
    target: str,
    *,
    batch_size: int,
) -> int:
    """Re-embed `collection` with the embedder `target` names and make it the collection's.

    Returns how many vectors were computed. Raises EmbedderUnavailable (nothing is swapped:
    searches go on with the old model, and running it again resumes).
    """
    try:
        dimensions = settings.dimension_of(target)
    except ConfigError as exc:
        raise InvalidInput("embedder", exc.message) from None
    embedder = embedders.get(target)
    async with pool.connection() as conn:
        cur = await conn.execute(
            query("collection_switch_start"), {"name": collection, "target": target}
        )
        row = await cur.fetchone()
    if row is None:
        raise NotFound(f"collection '{collection}' does not exist")
    collection_id = int(row[0])
    done = 0
    while True:  # until a pass finds nothing left: chunks may arrive during a pass
        found = await _fill(pool, embedder, collection_id, batch_size, chunks=True)
        found += await _fill(pool, embedder, collection_id, batch_size, chunks=False)
        done += found
        if not found:
            break
    async with pool.connection() as conn, conn.transaction():
        cur = await conn.execute(
            query("collection_switch_finish"),
            {"collection_id": collection_id, "target": target, "dimensions": dimensions},
        )
        row = await cur.fetchone()
    if not row or not row[0]:
        log.warning("collection %s was moved to another embedder meanwhile", collection)
    return done


async def _fill(
    pool: AsyncConnectionPool,
    embedder: Embedder,
    collection_id: int,
    batch_size: int,
    *,
    chunks: bool,
) -> int:
    """Give every chunk (or catalog item) of the collection lacking one its new vector."""
    select, update = (
        ("chunks_next_unembedded", "chunk_set_next_embedding")
        if chunks
        else ("catalog_items_next_unembedded", "catalog_item_set_next_embedding")
    )
    done, after = 0, 0
    while True:
        async with pool.connection() as conn:
            params: dict[str, Any] = {
                "collection_id": collection_id,
                "after": after,
                "limit": batch_size,
            }
            rows = await (await conn.execute(query(select), params)).fetchall()
        if not rows:
            return done
        texts = [_text(row, chunks=chunks) for row in rows]
        vectors: list[np.ndarray] = await embedder.embed_documents(texts)
        async with pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            await cur.executemany(
                query(update),
                [{"id": row[0], "embedding": v} for row, v in zip(rows, vectors, strict=True)],
            )
        done += len(rows)
        after = int(rows[-1][0])


def _text(row: Any, *, chunks: bool) -> str:
    if chunks:
        return store.embedding_text(row[1], row[2])
    _, sku, name, variant, attributes = row
    return item_text(CatalogItemIn(sku=sku, name=name, variant=variant, attributes=attributes))
