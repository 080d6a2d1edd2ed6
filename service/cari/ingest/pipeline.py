"""Documents to stored chunks: skip unchanged, chunk, embed, write — shared by HTTP and CLI."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread
import numpy as np
import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from cari import metrics
from cari.embed import Embedder, Embedders
from cari.errors import EmbedderUnavailable
from cari.ingest import store
from cari.ingest.chunking import Chunk, TokenCounter, chunk_document
from cari.ingest.store import CollectionRef, NewDocument, Status
from cari.queries import query
from cari.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Outcome:
    id: str
    status: Status
    chunks: int
    embedded: bool


@dataclass(slots=True)
class BatchResult:
    outcomes: list[Outcome] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def chunk(document: NewDocument, count_tokens: TokenCounter, settings: Settings) -> list[Chunk]:
    """Chunks sized so that title + chunk, as embedded, fits the model's window."""
    title_tokens = count_tokens(document.title) if document.title else 0
    return chunk_document(
        document.sections,
        title=document.title,
        count_tokens=count_tokens,
        max_tokens=max(settings.chunk_min_tokens, settings.chunk_max_tokens - title_tokens),
        min_tokens=settings.chunk_min_tokens,
        overlap_tokens=settings.chunk_overlap_tokens,
    )


class Ingestor:
    """Writes batches of documents; each document lands whole or not at all."""

    def __init__(self, pool: AsyncConnectionPool, embedders: Embedders, settings: Settings) -> None:
        self.pool = pool
        self.embedders = embedders
        self.settings = settings

    async def ingest(
        self, collection_name: str, documents: Sequence[NewDocument], *, compact: bool = True
    ) -> BatchResult:
        """Store the changed documents, each whole; `compact` as `store.write_documents`."""
        result = BatchResult()
        async with self.pool.connection() as conn:
            collection = await store.collection_ref(conn, collection_name)
            stored = await store.stored_hashes(conn, collection, [d.external_id for d in documents])
        changed = [d for d in documents if stored.get(d.external_id) != d.content_hash]
        unchanged = {d.external_id for d in documents} - {d.external_id for d in changed}

        embedder = self.embedders.get(collection.embedder)
        chunked = await anyio.to_thread.run_sync(self._chunk_all, embedder, changed)
        vectors = await self._embed(embedder, chunked, result)

        prepared, offset = [], 0
        for document, chunks in zip(changed, chunked, strict=True):
            own = None if vectors is None else vectors[offset : offset + len(chunks)]
            offset += len(chunks)
            prepared.append(store.Prepared(document, chunks, own))
        statuses: dict[str, Status] = {}
        if prepared:
            async with self.pool.connection() as conn:
                statuses = await store.write_documents(conn, collection, prepared, compact=compact)
        for document, chunks in zip(changed, chunked, strict=True):
            status = statuses[document.external_id]
            done = status != "unchanged"
            result.outcomes.append(
                Outcome(
                    document.external_id,
                    status,
                    len(chunks) if done else 0,
                    embedded=vectors is not None or not done,
                )
            )
        result.outcomes.extend(Outcome(i, "unchanged", 0, True) for i in sorted(unchanged))
        for outcome in result.outcomes:
            metrics.DOCUMENTS.labels(outcome.status).inc()
        written = sum(outcome.chunks for outcome in result.outcomes)
        metrics.CHUNKS.labels("true" if vectors is not None else "false").inc(written)
        return result

    def _chunk_all(self, embedder: Embedder, documents: Sequence[NewDocument]) -> list[list[Chunk]]:
        return [chunk(d, embedder.count_tokens, self.settings) for d in documents]

    async def _embed(
        self, embedder: Embedder, chunked: Sequence[Sequence[Chunk]], result: BatchResult
    ) -> list[np.ndarray] | None:
        texts = [store.embedding_text(c.title, c.content) for chunks in chunked for c in chunks]
        if not texts:
            return []
        try:
            return await embedder.embed_documents(texts)
        except EmbedderUnavailable as exc:
            metrics.EMBEDDER_FAILURES.labels("document", "unavailable").inc()
            # Store the text now (keyword search works); `cari reembed` adds vectors later.
            log.warning("embedding failed, storing chunks without vectors: %s", exc.message)
            result.warnings.append(
                f"stored without embeddings ({exc.message}); they are filled in later"
            )
            return None


async def reembed(
    pool: AsyncConnectionPool,
    embedders: Embedders,
    *,
    collection: CollectionRef | None = None,
    everything: bool = False,
    batch_size: int = 64,
) -> int:
    """Embed chunks stored without a vector (or, with `everything`, all of a collection's), each
    with the embedder its collection names.

    Returns how many chunks got a vector. Raises EmbedderUnavailable if an embedder is down.
    """
    assert collection is not None or not everything, "re-embedding everything needs a collection"
    done, after = 0, 0
    while True:
        async with pool.connection() as conn:
            params: dict[str, Any] = {
                "after": after,
                "limit": batch_size,
                "collection_id": collection.id if collection else None,
            }
            statement = "chunks_in_collection" if everything else "chunks_unembedded"
            cur = await conn.execute(query(statement), params)
            rows = await cur.fetchall()
        if not rows:
            return done
        embedded: list[tuple[int, np.ndarray]] = []
        for name in {row[3] for row in rows}:
            own = [row for row in rows if row[3] == name]
            embedded.extend(await _embed_rows(embedders.get(name), own))
        async with pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            await cur.executemany(
                query("chunk_set_embedding"),
                [{"id": chunk_id, "embedding": vector} for chunk_id, vector in embedded],
            )
            done += cur.rowcount  # a chunk replaced meanwhile is gone: not counted
        after = int(rows[-1][0])


async def _embed_rows(embedder: Embedder, rows: Sequence[Any]) -> list[tuple[int, np.ndarray]]:
    """Vectors for (id, title, content, …) rows. If the batch is refused, each row is tried on
    its own and a chunk the embedder refuses is skipped, so one bad chunk cannot block every
    chunk after it. Two refusals in a row mean the embedder is down: that is raised."""
    texts = [store.embedding_text(row[1], row[2]) for row in rows]
    try:
        vectors = await embedder.embed_documents(texts)
        return [(int(row[0]), v) for row, v in zip(rows, vectors, strict=True)]
    except EmbedderUnavailable:
        if len(rows) == 1:
            raise
    kept, refused_in_a_row = [], 0
    for row, text in zip(rows, texts, strict=True):
        try:
            kept.append((int(row[0]), (await embedder.embed_documents([text]))[0]))
            refused_in_a_row = 0
        except EmbedderUnavailable as exc:
            refused_in_a_row += 1
            if refused_in_a_row == 2:
                raise
            log.warning("chunk %s cannot be embedded, skipped: %s", row[0], exc.message)
    return kept


async def backfill_embeddings(
    pool: AsyncConnectionPool, embedders: Embedders, settings: Settings
) -> None:
    """The server's background task: embed chunks stored while the embedder was down."""
    while True:
        try:
            count = await reembed(pool, embedders, batch_size=settings.embedding_batch_size)
            if count:
                log.info("embedded %d chunks that were stored without vectors", count)
        except (EmbedderUnavailable, psycopg.Error, PoolTimeout) as exc:
            if isinstance(exc, EmbedderUnavailable):
                metrics.EMBEDDER_FAILURES.labels("document", "unavailable").inc()
            log.warning("background embedding will retry: %s", exc)
        except Exception:  # the task must outlive any failure, or the app shuts down
            log.exception("background embedding failed; it will retry")
        await anyio.sleep(settings.reembed_interval_s)
