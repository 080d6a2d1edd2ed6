"""Bulk ingestion: sources read in batches, several batches in flight, progress reported."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import islice
from typing import Any

import anyio
import anyio.abc
import psycopg
from psycopg_pool import PoolTimeout

from cari.db import database as db
from cari.db.migrations import (
    maintenance_options,
    vector_index_drop_concurrently,
    vector_index_repair,
)
from cari.db.queries import query
from cari.db.vector_space import Space, space
from cari.errors import CariError
from cari.ingest import files, store
from cari.ingest.files import Failure, InputFile
from cari.ingest.pipeline import Ingestor
from cari.ingest.store import NewDocument
from cari.settings import Settings

log = logging.getLogger(__name__)

# A batch also ends once its documents hold as much text as the load stored in about BATCH_S
# at the rate measured so far (the first one: FIRST_BATCH_CHARACTERS, ~25 chunks of English),
# never more than MAX_BATCH_CHARACTERS (~800 chunks). Each batch is a transaction: with the local
# model (~12 chunks/s on 2 cores) a fixed 1 MB batch embedded for over a minute before anything
# was stored, so an interrupted first load kept nothing and its progress stood still.
BATCH_S = 10.0
FIRST_BATCH_CHARACTERS = 32_000
MAX_BATCH_CHARACTERS = 1_000_000
# The BM25 statistics deltas of a load are folded this often (and at its end), not after every
# batch: reads add the pending deltas, so they stay exact meanwhile.
COMPACT_EVERY_S = 5.0


@dataclass(slots=True)
class Tally:
    """What a load has done so far: every count is of work stored (committed), but `embedded`,
    which counts chunks embedded, stored or still in a batch in flight."""

    documents: int = 0
    chunks: int = 0
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    not_embedded: int = 0
    embedded: int = 0
    # How far into the sources (bytes of their files) every document is done: stored,
    # unchanged or failed.
    bytes_done: int = 0
    failures: list[Failure] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Batch:
    documents: list[NewDocument]
    characters: int  # of text
    reaches: int  # bytes into the sources once its documents are done


async def ingest_sources(
    ingestor: Ingestor,
    collection: str,
    sources: Sequence[InputFile],
    *,
    batch_size: int,
    workers: int,
    defer_index: bool = False,
    on_progress: Callable[[Tally], None] = lambda _: None,
    tally: Tally | None = None,
) -> Tally:
    """Ingest every source; failures are collected, never raised, so the rest continue.
    `tally` (a new one if None) counts the work as it is done, so a caller that cancels the
    load knows what was stored: each batch is stored whole or not at all.

    With `defer_index` the HNSW index of the collection's width is dropped for the load and
    rebuilt once at the end (also when the load fails; a killed load's index is rebuilt by the
    next `cari` start) — but only when no other collection stores vectors of that width.

    Why, and not per-collection indexes or a chunks table partitioned by collection: the
    index is per width, so its drop would leave every other collection of the width searching
    without it, and a plain CREATE INDEX holds a SHARE lock on the whole table, so every write
    to every collection would wait for the build (13 s at 22k chunks on 2 cores; past the
    statement timeout they fail). Here the drop and the build are CONCURRENTLY (writes pass;
    an interrupted build's INVALID index is dropped and built again) on a connection without a
    statement timeout, and a width shared with another collection keeps its index: the load
    inserts through it, maintaining the graph row by row (docs/benchmarks.md, "Bulk loads
    beside live writes": 0.77 of the old rate when the load is 5 times the rest of its width,
    2.3 times it when a tenth, since the old rebuild covered the whole width). Per-collection
    indexes would need the collection's id as a constant in every vector statement (a partial
    index is used only for a predicate the plan proves), an index per collection and a build
    per new one; partitions would change every statement and key of the chunks table. Both
    stay possible if loads into shared widths must be fast.
    """
    tally = Tally() if tally is None else tally
    load = partial(_ingest, ingestor, collection, sources, batch_size, workers, on_progress, tally)
    if not defer_index:
        return await load()
    settings = ingestor.settings
    dsn = ingestor.pool.conninfo
    assert isinstance(dsn, str), "cari.runtime.make_pool gives a pool its DSN"
    # Its own connection: autocommit (the concurrent statements cannot run in a transaction),
    # no statement timeout, and not one of the pool's for the whole load.
    async with await psycopg.AsyncConnection.connect(
        dsn, autocommit=True, options=maintenance_options(settings)
    ) as lock:
        ref = await store.collection_ref(lock, collection)
        width = space(ingestor.embedders.get(ref.embedder).dimension, settings)
        await lock.execute(query("vector_index_lock"))
        try:
            cursor = await lock.execute(
                query("vector_width_shared"),
                {"collection_id": ref.id, "dimension": width.dimension},
            )
            shared = await cursor.fetchone()
            if shared and shared[0]:
                log.info(
                    "other collections store %d-dimension vectors: the load keeps their index",
                    width.dimension,
                )
                return await load()
            await lock.execute(vector_index_drop_concurrently(width))
            try:
                return await load()
            finally:
                with anyio.CancelScope(shield=True):
                    await _rebuild(lock, width, settings)
        finally:
            with anyio.CancelScope(shield=True):
                await lock.execute(query("vector_index_unlock"))


async def _rebuild(conn: psycopg.AsyncConnection[Any], width: Space, settings: Settings) -> None:
    index = width.index_name("chunks")
    cursor = await conn.execute(query("vector_index_valid"), {"index": index})
    row = await cursor.fetchone()
    for statement in vector_index_repair(width, "chunks", settings, row[0] if row else None):
        await conn.execute(statement)


async def _ingest(
    ingestor: Ingestor,
    collection: str,
    sources: Sequence[InputFile],
    batch_size: int,
    workers: int,
    on_progress: Callable[[Tally], None],
    tally: Tally,
) -> Tally:
    documents = _documents(sources, ingestor.settings.max_document_bytes, tally, on_progress)
    send, receive = anyio.create_memory_object_stream[_Batch](workers)
    limit = FIRST_BATCH_CHARACTERS  # of text a batch, from the rate measured so far

    async def produce() -> None:
        async with send:
            while batch := await anyio.to_thread.run_sync(
                _next_batch, documents, batch_size, limit
            ):
                await send.send(batch)

    next_compaction = time.monotonic() + COMPACT_EVERY_S

    async def work(batches: anyio.abc.ObjectReceiveStream[_Batch]) -> None:
        nonlocal next_compaction, limit
        async for batch in batches:
            started = time.monotonic()
            await _ingest_batch(ingestor, collection, batch.documents, tally, on_progress)
            rate = batch.characters / max(time.monotonic() - started, 1e-3)
            limit = round(min(max(rate * BATCH_S, FIRST_BATCH_CHARACTERS), MAX_BATCH_CHARACTERS))
            tally.bytes_done = max(tally.bytes_done, batch.reaches)
            on_progress(tally)
            if time.monotonic() >= next_compaction:
                next_compaction = time.monotonic() + COMPACT_EVERY_S
                await _compact(ingestor, collection)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(produce)
        for _ in range(workers):
            tasks.start_soon(work, receive.clone())
        receive.close()
    await _compact(ingestor, collection)
    return tally


async def _compact(ingestor: Ingestor, collection: str) -> None:
    """Fold the collection's statistics deltas and its delta postings (into packed blocks, with
    the extension); a failure only leaves them for the next fold."""
    try:
        async with ingestor.pool.connection() as conn:
            ref = await store.collection_ref(conn, collection)
            await store.compact_statistics(conn, ref, fold_postings=1)
    except (CariError, psycopg.Error, PoolTimeout) as exc:
        log.warning("folding the BM25 statistics deltas failed, left for later: %s", exc)


def _documents(
    sources: Sequence[InputFile], max_bytes: int, tally: Tally, on_progress: Callable[[Tally], None]
) -> Iterator[tuple[NewDocument, int]]:
    """The sources' documents, each with how far into the sources (bytes of their files) the
    load is once it is done."""
    done = 0
    # One run stores one version of each id: later duplicates are failures, whatever the batch
    # size or the number of workers (two folders may both hold a README.md).
    first_seen: dict[str, str] = {}
    for source in sources:
        text = 0
        for item in files.read(source, max_bytes):
            if isinstance(item, Failure):
                tally.failures.append(item)
                on_progress(tally)
            elif item.external_id in first_seen:
                tally.failures.append(
                    Failure(
                        item.source or source.name,
                        f"id '{item.external_id}' was already read from "
                        f"{first_seen[item.external_id]}; this one was skipped",
                    )
                )
                on_progress(tally)
            else:
                first_seen[item.external_id] = item.source or source.name
                text += sum(len(s.text) for s in item.sections)
                # Text read stands for the file's bytes: a file's markup makes them differ.
                yield item, done + min(text, source.size or text)
        done += source.size or text


def failure_reason(exc: Exception, settings: Settings) -> str:
    """Why a batch failed, for the user: a database failure as the HTTP API says it (not the
    driver's text, with the statement and its trigger's SQL: that goes to the log), a value the
    database refused by PostgreSQL's own one-line message."""
    if isinstance(exc, CariError):
        return exc.message
    if isinstance(exc, psycopg.OperationalError | PoolTimeout):
        log.warning("database error while ingesting: %s", exc)
        return db.failure(exc, settings).message
    if isinstance(exc, psycopg.Error) and exc.diag.message_primary:
        return exc.diag.message_primary
    return " ".join(str(exc).split())


def _next_batch(
    documents: Iterator[tuple[NewDocument, int]], size: int, characters: int
) -> _Batch | None:
    """Up to `size` documents, fewer once they hold `characters` of text; None when none are
    left."""
    batch = _Batch([], 0, 0)
    for document, reaches in islice(documents, size):
        batch.documents.append(document)
        batch.characters += sum(len(s.text) for s in document.sections)
        batch.reaches = reaches
        if batch.characters >= characters:
            break
    return batch if batch.documents else None


async def _ingest_batch(
    ingestor: Ingestor,
    collection: str,
    batch: list[NewDocument],
    tally: Tally,
    on_progress: Callable[[Tally], None],
) -> None:
    def embedded(count: int) -> None:
        tally.embedded += count
        on_progress(tally)

    try:
        result = await ingestor.ingest(collection, batch, compact=False, on_embedded=embedded)
    except (CariError, psycopg.Error, PoolTimeout) as exc:
        if len(batch) > 1 and not isinstance(exc, psycopg.OperationalError | PoolTimeout):
            # Likely one document's fault (a language PostgreSQL does not know, a value it
            # refuses): each is tried alone, so only the faulty ones are reported.
            for document in batch:
                await _ingest_batch(ingestor, collection, [document], tally, on_progress)
            return
        reason = failure_reason(exc, ingestor.settings)
        tally.failures.extend(
            Failure(f"{d.source} id {d.external_id}" if d.source else f"id {d.external_id}", reason)
            for d in batch
        )
        return
    for outcome in result.outcomes:
        tally.documents += 1
        tally.chunks += outcome.chunks
        if outcome.status == "created":
            tally.created += 1
        elif outcome.status == "updated":
            tally.updated += 1
        else:
            tally.unchanged += 1
        if not outcome.embedded:
            tally.not_embedded += outcome.chunks
    tally.warnings.extend(w for w in result.warnings if w not in tally.warnings)
