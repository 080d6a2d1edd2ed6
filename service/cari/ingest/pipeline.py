"""Documents to stored chunks: skip unchanged, chunk, embed, write — shared by HTTP and CLI."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread
import numpy as np
import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from cari.db.queries import query
from cari.embed import Embedder, Embedders
from cari.errors import EmbedderUnavailable
from cari.ingest import store
from cari.ingest.chunking import NewChunk, TokenCounter, chunk_document
from cari.ingest.store import CollectionRef, NewDocument, Status
from cari.observability import metrics
from cari.settings import Settings

log = logging.getLogger(__name__)

# Slices of a write's texts under an embedding budget: the first is small, to measure the
# embedder; the next ones take about SLICE_S each at the measured rate.
FIRST_SLICE = 8
SLICE_S = 2.0
MAX_SLICE = 1024


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


def chunk(document: NewDocument, count_tokens: TokenCounter, settings: Settings) -> list[NewChunk]:
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
        self,
        collection_name: str,
        documents: Sequence[NewDocument],
        *,
        compact: bool = True,
        embedding_budget_s: float | None = None,
        on_embedded: Callable[[int], None] | None = None,
        visible: store.Visible = store.EVERY_DOCUMENT,
    ) -> BatchResult:
        """Store the changed documents, each whole; `compact` and `visible` (the documents the
        writer may replace) as `store.write_documents`.

        With `embedding_budget_s` (an HTTP write), no further texts are sent to the embedder
        once that much time has gone: the chunks left are stored without vectors, for the
        server's background embedding (`backfill_embeddings`). `on_embedded` is told how many
        chunks each slice of the embedding gave (a load's progress).

        Once the write begins it finishes, cancelled or not (it is a short transaction): a
        cancelled caller's documents are stored whole, or, if cancelled before, not at all.
        """
        result = BatchResult()
        async with self.pool.connection() as conn:
            collection = await store.collection_ref(conn, collection_name)
            stored = await store.stored_hashes(conn, collection, [d.external_id for d in documents])
        changed = [d for d in documents if stored.get(d.external_id) != d.content_hash]
        unchanged = {d.external_id for d in documents} - {d.external_id for d in changed}

        embedder = self.embedders.get(collection.embedder)
        chunked = await anyio.to_thread.run_sync(self._chunk_all, embedder, changed)
        vectors = await self._embed(embedder, chunked, result, embedding_budget_s, on_embedded)

        prepared, offset = [], 0
        for document, chunks in zip(changed, chunked, strict=True):
            own = None if vectors is None else vectors[offset : offset + len(chunks)]
            offset += len(chunks)
            prepared.append(store.PreparedDocument(document, chunks, own))
        statuses: dict[str, Status] = {}
        if prepared:
            with anyio.CancelScope(shield=True):
                async with self.pool.connection() as conn:
                    statuses = await store.write_documents(
                        conn, collection, prepared, visible=visible, compact=compact
                    )
        for item in prepared:
            status = statuses[item.document.external_id]
            done = status != "unchanged"
            stored_vectors = item.vectors
            result.outcomes.append(
                Outcome(
                    item.document.external_id,
                    status,
                    len(item.chunks) if done else 0,
                    embedded=not done
                    or (stored_vectors is not None and all(v is not None for v in stored_vectors)),
                )
            )
        result.outcomes.extend(Outcome(i, "unchanged", 0, True) for i in sorted(unchanged))
        for outcome in result.outcomes:
            metrics.DOCUMENTS.labels(outcome.status).inc()
        for item in prepared:
            if statuses[item.document.external_id] != "unchanged":
                with_vector = sum(v is not None for v in item.vectors or ())
                metrics.CHUNKS.labels("true").inc(with_vector)
                metrics.CHUNKS.labels("false").inc(len(item.chunks) - with_vector)
        return result

    def _chunk_all(
        self, embedder: Embedder, documents: Sequence[NewDocument]
    ) -> list[list[NewChunk]]:
        return [chunk(d, embedder.count_tokens, self.settings) for d in documents]

    async def _embed(
        self,
        embedder: Embedder,
        chunked: Sequence[Sequence[NewChunk]],
        result: BatchResult,
        budget_s: float | None,
        on_embedded: Callable[[int], None] | None,
    ) -> list[np.ndarray | None] | None:
        """A vector per chunk in order (None: embedded later), or None when the embedder is
        down. Within a budget, or reporting progress, the texts go in slices sized from the
        rate so far, each to take about `SLICE_S`; the slice in flight when the budget ends is
        abandoned: a hung embedder (a 60 s timeout, retried) would otherwise hold the write
        for minutes."""
        texts = [store.embedding_text(c.title, c.content) for chunks in chunked for c in chunks]
        vectors: list[np.ndarray | None] = []
        started = time.monotonic()
        sliced = budget_s is not None or on_embedded is not None
        size = FIRST_SLICE if sliced else len(texts)
        try:
            while len(vectors) < len(texts):
                if budget_s is not None and vectors and time.monotonic() - started >= budget_s:
                    break
                begun = time.monotonic()
                left = float("inf") if budget_s is None else started + budget_s - begun
                with anyio.move_on_after(left) as slice_scope:
                    part = await embedder.embed_documents(texts[len(vectors) : len(vectors) + size])
                if slice_scope.cancelled_caught:
                    break
                vectors.extend(part)
                if on_embedded is not None:
                    on_embedded(len(part))
                if sliced:
                    rate = len(part) / max(time.monotonic() - begun, 1e-3)
                    size = min(max(int(rate * SLICE_S), FIRST_SLICE), MAX_SLICE)
        except EmbedderUnavailable as exc:
            metrics.EMBEDDER_FAILURES.labels("document", "unavailable").inc()
            # Store the text now (keyword search works); `cari reembed` adds vectors later.
            log.warning("embedding failed, storing chunks without vectors: %s", exc.message)
            result.warnings.append(
                f"stored without embeddings ({exc.message}); they are filled in later"
            )
            return None
        if pending := len(texts) - len(vectors):
            log.info("write embedding budget spent: %d of %d chunks left", pending, len(texts))
            result.warnings.append(
                f"{pending} of {len(texts)} chunks stored without embeddings: embedding them "
                f"would outlast the write's {budget_s:g} s budget (CARI_WRITE_EMBEDDING_BUDGET_S); "
                "the server fills them in the background, keyword search finds them now"
            )
            vectors.extend([None] * pending)
        return vectors


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
