"""Documents and chunks in PostgreSQL: hash lookups, transactional replace, binary COPY."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import numpy as np
import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from cari.collection import unknown_language
from cari.db.queries import query
from cari.errors import Conflict, InvalidInput, NotFound
from cari.ingest.chunking import NewChunk
from cari.ingest.formats import Section
from cari.limits import refuse_nul
from cari.observability import metrics

Conn = psycopg.AsyncConnection[Any]
Status = Literal["created", "updated", "unchanged"]

CHUNK_COLUMN_TYPES = ["int8", "int8", "int4", "text", "text", "jsonb", "oid", "int4", "vector"]
log = logging.getLogger(__name__)

# Chunks per COPY statement: ~2 s of trigger and index work on an idle 2-core machine, far
# below the default statement timeout even when the machine is busy.
COPY_ROWS = 500
# Tries at folding the statistics deltas while another compaction of the collection runs.
COMPACT_ATTEMPTS = 5
COMPACT_RETRY_S = 0.02
# Delta postings a collection gathers before a write folds them into packed blocks (with the
# `cari_bm25` extension): keyword searches sum the delta in SQL, so it stays small, while each
# fold rewrites the last block of every lexeme it touches, so it does not run on every write.
FOLD_POSTINGS = 10_000
# About what a chunk holds (61 on the five sets' passages): a fold also runs once as many dead
# chunks as this many postings make have gathered.
POSTINGS_PER_CHUNK = 50


@dataclass(frozen=True, slots=True)
class CollectionRef:
    id: int
    name: str
    language: int  # regconfig oid, as binary COPY sends it
    embedder: str | None = None  # the embedder it names; None: the default one
    next_embedder: str | None = None  # the one `cari reembed --embedder` moves it to


@dataclass(frozen=True, slots=True)
class NewDocument:
    external_id: str
    title: str
    sections: list[Section]
    metadata: dict[str, Any]
    source: str | None
    language: str | None = None  # its own text-search configuration; None: the collection's

    @property
    def content_hash(self) -> str:
        """Hash of everything stored for the document: equal hash, nothing to redo."""
        fields: list[Any] = [
            self.title,
            [[s.text, s.metadata] for s in self.sections],
            self.metadata,
            self.source,
        ]
        if self.language is not None:  # appended only when set: older hashes stay valid
            fields.append(self.language)
        canonical = json.dumps(fields, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(canonical.encode()).hexdigest()


MAX_TITLE_CHARACTERS = 1000  # the title is indexed and embedded with every chunk


def check_storable(document: NewDocument) -> None:
    """Refuse what PostgreSQL cannot hold (NUL characters) or what would swamp every chunk."""
    if len(document.title) > MAX_TITLE_CHARACTERS:
        raise InvalidInput(
            "title",
            f"is {len(document.title)} characters, over the {MAX_TITLE_CHARACTERS} limit",
        )
    refuse_nul("id", document.external_id)
    refuse_nul("title", document.title)
    refuse_nul("source", document.source)
    refuse_nul("metadata", document.metadata)
    if not document.external_id.strip("/"):
        # A URL path cannot tell `…/documents/%2F` from the collection's `…/documents`.
        raise InvalidInput("id", "must hold a character other than '/'")


def embedding_text(title: str, content: str) -> str:
    """What gets embedded for a chunk: its document's title gives the passage context."""
    return f"{title}\n{content}" if title else content


async def collection_ref(conn: Conn, name: str) -> CollectionRef:
    cur = await conn.execute(query("collection_ref"), {"name": name})
    row = await cur.fetchone()
    if row is None:
        raise NotFound(f"collection '{name}' does not exist")
    return CollectionRef(
        id=int(row[0]), name=name, language=int(row[1]), embedder=row[2], next_embedder=row[3]
    )


async def embedder_unchanged(conn: Conn, collection: CollectionRef) -> bool:
    """Inside a writing transaction: whether the collection still names the embedder it named
    when `collection` was read, locked so until the transaction ends (a vector made by a
    replaced model must not be written after the move)."""
    cur = await conn.execute(query("collection_embedder_lock"), {"collection_id": collection.id})
    row = await cur.fetchone()
    return row is not None and row[0] == collection.embedder


async def stored_hashes(
    conn: Conn, collection: CollectionRef, external_ids: Sequence[str]
) -> dict[str, str]:
    cur = await conn.execute(
        query("document_hashes"),
        {"collection_id": collection.id, "external_ids": list(external_ids)},
    )
    return {str(row[0]): str(row[1]) for row in await cur.fetchall()}


# The documents a request may see, and so read, replace or delete: a fragment on the documents
# table (alias `c`) and its parameters (cari.search.filters.compile_documents; empty: all).
Visible = tuple[sql.Composable, dict[str, Any]]
EVERY_DOCUMENT: Visible = (sql.SQL(""), {})


@dataclass(frozen=True, slots=True)
class PreparedDocument:
    """A document ready to store: its chunks and their vectors (None: embed later)."""

    document: NewDocument
    chunks: Sequence[NewChunk]
    vectors: Sequence[np.ndarray | None] | None


async def write_documents(
    conn: Conn,
    collection: CollectionRef,
    batch: Sequence[PreparedDocument],
    *,
    visible: Visible = EVERY_DOCUMENT,
    compact: bool = True,
) -> dict[str, Status]:
    """Store the documents and all their chunks in one transaction (a savepoint when nested),
    then fold the BM25 statistics deltas unless `compact` is false (a bulk load folds now and
    then instead: after every batch of 32 one-chunk documents the folds took 8.1 s of the
    database's time per 20k chunks, beside 19.9 s for the postings themselves).

    Ids must be unique within the batch. Upsert the documents, delete the replaced ones'
    chunks, then binary COPY the new chunks, `COPY_ROWS` to a statement: each COPY also writes
    its chunks' BM25 postings and HNSW entries, so one statement for a large document (12,000
    chunks of a 9.5 MB text) outlasted the statement timeout; the transaction keeps the
    document whole.

    A document `visible` hides (another tenant's, for a key with a filter) is not replaced: the
    write is refused (Conflict) and nothing of it stored. The upsert itself leaves such a row
    alone, so a document another tenant stores under the same id while this batch embeds is
    safe too, not only one there when the request came.
    """
    # Rows are locked in id order, so concurrent batches sharing documents cannot deadlock.
    batch = sorted(batch, key=lambda p: p.document.external_id)
    statuses: dict[str, Status] = {p.document.external_id: "unchanged" for p in batch}
    languages = await _language_oids(conn, {p.document.language for p in batch} - {None})
    try:
        async with conn.transaction():
            if not await embedder_unchanged(conn, collection):
                # Moved to another embedder since these were embedded: stored without vectors, the
                # server's re-embedding gives them the new model's.
                batch = [PreparedDocument(p.document, p.chunks, None) for p in batch]
            fragment, params = visible
            cur = await conn.execute(
                sql.SQL(query("documents_upsert")).format(filters=fragment),
                {
                    **params,
                    "collection_id": collection.id,
                    "external_ids": [p.document.external_id for p in batch],
                    "titles": [p.document.title for p in batch],
                    "sources": [p.document.source for p in batch],
                    "metadata": [Jsonb(p.document.metadata) for p in batch],
                    "content_hashes": [p.document.content_hash for p in batch],
                },
            )
            written: dict[str, int] = {}
            replaced: list[int] = []
            for external_id, document_id, created in await cur.fetchall():
                written[external_id] = document_id
                statuses[external_id] = "created" if created else "updated"
                if not created:
                    replaced.append(document_id)
            if visible != EVERY_DOCUMENT and (
                hidden := await hidden_documents(
                    conn, collection, [i for i in statuses if i not in written], visible
                )
            ):
                raise taken(collection.name, hidden[0])
            if replaced:
                await conn.execute(query("documents_chunks_delete"), {"document_ids": replaced})
            if not written:
                return statuses
            rows = list(_chunk_rows(collection, batch, written, languages))
            for start in range(0, len(rows), COPY_ROWS):
                async with conn.cursor().copy(query("chunks_copy")) as copy:
                    copy.set_types(CHUNK_COLUMN_TYPES)
                    for row in rows[start : start + COPY_ROWS]:
                        await copy.write_row(row)
    except psycopg.errors.ForeignKeyViolation as exc:
        # The collection was deleted after it was looked up: what the caller must hear is
        # that it does not exist (404), not an internal error.
        if exc.diag.table_name in ("documents", "chunks"):
            raise NotFound(f"collection '{collection.name}' does not exist") from exc
        raise
    if compact:
        await compact_statistics(conn, collection)
    return statuses


def _chunk_rows(
    collection: CollectionRef,
    batch: Sequence[PreparedDocument],
    written: dict[str, int],
    languages: dict[str | None, int],
) -> Iterator[tuple[Any, ...]]:
    """The COPY rows of the written documents' chunks."""
    for item in batch:
        document_id = written.get(item.document.external_id)
        if document_id is None:
            continue
        for i, chunk in enumerate(item.chunks):
            yield (
                collection.id,
                document_id,
                chunk.ordinal,
                chunk.title,
                chunk.content,
                Jsonb({**item.document.metadata, **chunk.metadata}),
                languages.get(item.document.language, collection.language),
                chunk.token_count,
                None if item.vectors is None else item.vectors[i],
            )


async def compact_statistics(
    conn: Conn, collection: CollectionRef, *, fold_postings: int = FOLD_POSTINGS
) -> None:
    """Fold the BM25 statistics deltas of committed writes into their base tables, then the
    delta postings into packed blocks once there are `fold_postings` of them (the extension's
    engine only; 1: whatever there is, as a bulk load does at its end).

    Writers only append deltas (no hot rows); folding them keeps the reads short. Inside an
    outer transaction the deltas are not committed yet, so that transaction's owner does it.
    A fold that gives way to a writer leaves the delta for the next one: reads stay exact.
    """
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        return
    try:
        await _compact(conn, collection, fold_postings)
    except psycopg.errors.DataCorrupted as exc:
        # Each fold would fail alike until the blocks are rewritten: said each time, loudly.
        metrics.KEYWORD_INDEX_DAMAGE.labels("fold").inc()
        log.error(
            "BM25 upkeep of '%s' cannot fold its new postings into blocks, one is damaged "
            "(%s): keyword search stays exact, the delta grows; `cari bm25 check -c %s` names "
            "the block, `cari bm25 repair -c %s` rewrites the blocks",
            collection.name,
            " ".join(str(exc).split()),
            collection.name,
            collection.name,
        )
    except psycopg.Error as exc:
        # The write committed before this: it must not be reported as failed because the
        # upkeep after it did (a deadlock with a collection being deleted, a lost connection).
        # The deltas stay for the next compaction; reads are exact either way.
        log.warning("BM25 upkeep of collection %s left for later: %s", collection.id, exc)


async def _compact(conn: Conn, collection: CollectionRef, fold_postings: int) -> None:
    # A compaction that is running may have started before this write committed and so leave
    # its deltas behind: wait for it briefly and fold them, rather than leave them pending until
    # the next write (reads stay exact either way; a rebuild holds the lock longer: give up).
    for _ in range(COMPACT_ATTEMPTS):
        cur = await conn.execute(query("bm25_compact"), {"collection_id": collection.id})
        row = await cur.fetchone()
        if row is None or row[0]:
            break
        await anyio.sleep(COMPACT_RETRY_S)
    await conn.execute(
        query("bm25_fold"),
        {
            "collection_id": collection.id,
            "min_postings": fold_postings,
            "min_dead": max(1, fold_postings // POSTINGS_PER_CHUNK),
        },
    )


async def _language_oids(conn: Conn, names: set[str | None]) -> dict[str | None, int]:
    """Text-search configurations by name, as binary COPY sends them; unknown names fail."""
    found = await _known_languages(conn, names)
    if unknown := names - found.keys():
        raise await unknown_language(conn, sorted(map(str, unknown))[0])
    return found


async def unknown_languages(conn: Conn, names: set[str]) -> dict[str, InvalidInput]:
    """Why each of `names` that is no text-search configuration cannot be a document's
    language: checked before a batch is written, so that only its documents are refused."""
    known = await _known_languages(conn, names)
    return {name: await unknown_language(conn, name) for name in sorted(names - known.keys())}


async def _known_languages(conn: Conn, names: Collection[str | None]) -> dict[str | None, int]:
    if not names:
        return {}
    cur = await conn.execute(query("text_search_config_oids"), {"names": sorted(map(str, names))})
    return {str(name): int(oid) for name, oid in await cur.fetchall()}


async def get_document(
    conn: Conn, collection: CollectionRef, external_id: str, visible: Visible
) -> dict[str, Any]:
    """The document with its chunks (text, token count, whether embedded); one it may not see
    does not exist for the request."""
    fragment, params = visible
    async with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            sql.SQL(query("document_get")).format(filters=fragment),
            {**params, "collection_id": collection.id, "external_id": external_id},
        )
        document = await cur.fetchone()
        if document is None:
            raise NotFound(f"document '{external_id}' does not exist in '{collection.name}'")
        await cur.execute(query("document_chunks"), {"document_id": document["id"]})
        document["chunks"] = await cur.fetchall()
    return document


async def list_documents(
    conn: Conn,
    collection: CollectionRef,
    *,
    after: str | None,
    limit: int,
    source: str | None,
    metadata: sql.Composable,
    metadata_params: dict[str, Any],
) -> list[dict[str, Any]]:
    """Up to `limit` documents after the id `after`, in id order, without their chunks."""
    statement = sql.SQL(query("documents_list")).format(filters=metadata)
    params = {
        **metadata_params,
        "collection_id": collection.id,
        "after": after,
        "source": source,
        "limit": limit,
    }
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(statement, params)
        return await cur.fetchall()


async def delete_document(
    conn: Conn, collection: CollectionRef, external_id: str, visible: Visible
) -> None:
    fragment, params = visible
    cur = await conn.execute(
        sql.SQL(query("document_delete")).format(filters=fragment),
        {**params, "collection_id": collection.id, "external_id": external_id},
    )
    if await cur.fetchone() is None:
        raise NotFound(f"document '{external_id}' does not exist in '{collection.name}'")
    await compact_statistics(conn, collection)


def taken(collection: str, external_id: str) -> Conflict:
    """A write through a key with a filter naming a document the filter hides. (The 409 tells
    the key no more than that the id is taken: docs/keys.md says to give each tenant ids of
    its own.)"""
    return Conflict(
        f"document id '{external_id}' is taken in '{collection}' by a document this key "
        "cannot see: choose another id"
    )


async def hidden_documents(
    conn: Conn, collection: CollectionRef, external_ids: Sequence[str], visible: Visible
) -> list[str]:
    """Which of `external_ids` name a document the request may not see."""
    fragment, params = visible
    cur = await conn.execute(
        sql.SQL(query("documents_hidden")).format(filters=fragment),
        {**params, "collection_id": collection.id, "ids": list(external_ids)},
    )
    return [str(row[0]) for row in await cur.fetchall()]


async def clear_documents(conn: Conn, collection: CollectionRef) -> int:
    cur = await conn.execute(query("documents_clear"), {"collection_id": collection.id})
    await compact_statistics(conn, collection)
    return cur.rowcount
