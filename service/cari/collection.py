"""Collections: named knowledge bases, each with its language and search defaults."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

import msgspec
import psycopg
from psycopg import errors as pg_errors
from psycopg.rows import kwargs_row

from cari.db import keyword_damage
from cari.db.keyword_damage import DamagedBlock
from cari.db.queries import query
from cari.errors import ConfigError, Conflict, InvalidInput, NotFound
from cari.limits import refuse_nul
from cari.schema.collections import (
    Collection,
    CollectionCreate,
    CollectionUpdate,
    RelevanceScale,
)
from cari.settings import Settings

Conn = psycopg.AsyncConnection[Any]


def _row(
    *, relevance_cosine_floor: float | None, relevance_cosine_ceiling: float | None, **row: Any
) -> Collection:
    scale = None
    if relevance_cosine_floor is not None and relevance_cosine_ceiling is not None:
        scale = RelevanceScale(
            cosine_floor=relevance_cosine_floor, cosine_ceiling=relevance_cosine_ceiling
        )
    return Collection(relevance_scale=scale, **row)


def named(collection: Collection, settings: Settings) -> Collection:
    """The collection as reported: made with the default embedder (stored as NULL, so that it
    follows CARI_EMBEDDER), it names the default one."""
    if collection.embedder is not None:
        return collection
    return msgspec.structs.replace(collection, embedder=settings.embedder)


def _refuse_nul(settings: CollectionCreate | CollectionUpdate) -> None:
    """The settings that are free text (the router's words, the no-information sentence)."""
    for field in ("pricing_keywords", "financing_keywords", "no_information"):
        refuse_nul(field, getattr(settings, field))


async def create(conn: Conn, spec: CollectionCreate, settings: Settings) -> Collection:
    """Create the collection; its vectors get the width of the embedder it names."""
    _refuse_nul(spec)
    try:
        dimensions = settings.dimension_of(spec.embedder)
    except ConfigError as exc:
        raise InvalidInput("embedder", exc.message) from None
    params = {**msgspec.structs.asdict(spec), "dimensions": dimensions}
    try:
        async with conn.transaction(), conn.cursor(row_factory=kwargs_row(_row)) as cur:
            await cur.execute(query("collection_create"), params)
            row = await cur.fetchone()
    except pg_errors.UniqueViolation:
        raise Conflict(f"collection '{spec.name}' exists already") from None
    except pg_errors.CheckViolation:  # e.g. a trailing newline, which the pattern's $ allows
        raise InvalidInput("name", "must be a slug: a-z, 0-9, '-', '_'") from None
    except pg_errors.UndefinedObject:
        raise await unknown_language(conn, spec.language) from None
    assert row is not None
    return row


async def list_all(conn: Conn) -> list[Collection]:
    async with conn.cursor(row_factory=kwargs_row(_row)) as cur:
        await cur.execute(query("collection_list"))
        return await cur.fetchall()


async def get(conn: Conn, name: str) -> Collection:
    async with conn.cursor(row_factory=kwargs_row(_row)) as cur:
        await cur.execute(query("collection_get"), {"name": name})
        row = await cur.fetchone()
    if row is None:
        raise NotFound(f"collection '{name}' does not exist")
    return row


async def update(conn: Conn, name: str, changes: CollectionUpdate) -> Collection:
    """Apply the given changes; a new language re-indexes the collection's text."""
    _refuse_nul(changes)
    params = {
        field: (None if value is msgspec.UNSET else value)
        for field, value in msgspec.structs.asdict(changes).items()
    }
    params["name"] = name
    # The fields that can be set back to NULL, so NULL cannot mean "unchanged" for them.
    params["no_information_set"] = changes.no_information is not msgspec.UNSET
    params["search_threshold_set"] = changes.search_threshold is not msgspec.UNSET
    params["ef_search_set"] = changes.ef_search is not msgspec.UNSET
    scale = changes.relevance_scale
    params["relevance_scale_set"] = scale is not msgspec.UNSET
    del params["relevance_scale"]
    params["relevance_cosine_floor"] = None
    params["relevance_cosine_ceiling"] = None
    if isinstance(scale, RelevanceScale):
        if not scale.cosine_floor < scale.cosine_ceiling:
            raise InvalidInput("relevance_scale", "cosine_floor must be below cosine_ceiling")
        params["relevance_cosine_floor"] = scale.cosine_floor
        params["relevance_cosine_ceiling"] = scale.cosine_ceiling
    try:
        async with conn.transaction(), conn.cursor(row_factory=kwargs_row(_row)) as cur:
            await cur.execute(query("collection_update"), params)
            row = await cur.fetchone()
    except pg_errors.UndefinedObject:
        raise await unknown_language(conn, str(changes.language)) from None
    if row is None:
        raise NotFound(f"collection '{name}' does not exist")
    return row


async def rebuild_keyword_index(conn: Conn, name: str) -> None:
    """Recompute the collection's BM25 postings and statistics from its chunks."""
    async with conn.transaction():
        cur = await conn.execute(query("bm25_rebuild"), {"name": name})
        if await cur.fetchone() is None:
            raise NotFound(f"collection '{name}' does not exist")


async def keyword_index_differences(conn: Conn, name: str) -> dict[str, int]:
    """What a full recount finds different in the collection's BM25 postings and statistics."""
    # Its id alone: a database migrated down to an older schema is checked too.
    cur = await conn.execute(query("collection_ref"), {"name": name})
    if await cur.fetchone() is None:
        raise NotFound(f"collection '{name}' does not exist")
    cur = await conn.execute(query("bm25_check"), {"name": name})
    return {str(kind): int(count) for kind, count in await cur.fetchall()}


@dataclasses.dataclass(frozen=True, slots=True)
class KeywordIndexCheck:
    """`cari bm25 check` of one collection: its damaged blocks, else what a recount from its
    chunks finds different; or the error that stopped the check."""

    collection: str
    damaged: list[DamagedBlock] = dataclasses.field(default_factory=list)
    differences: dict[str, int] = dataclasses.field(default_factory=dict)
    error: str | None = None

    @property
    def status(self) -> Literal["exact", "differs", "damaged", "unchecked"]:
        if self.error is not None:
            return "unchecked"
        if self.damaged:
            return "damaged"
        return "differs" if any(self.differences.values()) else "exact"


async def check_keyword_index(conn: Conn, name: str) -> KeywordIndexCheck:
    """Every packed block of the collection read alone (it decodes and agrees with its row),
    then, if none is damaged, a full recount of its postings and statistics from its chunks
    compared with the stored ones. On a connection in autocommit."""
    cur = await conn.execute(query("collection_ref"), {"name": name})
    if (row := await cur.fetchone()) is None:
        raise NotFound(f"collection '{name}' does not exist")
    try:
        if damaged := await keyword_damage.find(conn, int(row[0])):
            return KeywordIndexCheck(name, damaged=damaged)  # the recount would read them
        differences = await keyword_index_differences(conn, name)
    except psycopg.Error as exc:
        return KeywordIndexCheck(name, error=" ".join(str(exc).split()))
    return KeywordIndexCheck(name, differences=differences)


async def delete(conn: Conn, name: str) -> None:
    """Delete the collection with all its documents, chunks and structured rows."""
    async with conn.transaction():
        cur = await conn.execute(query("collection_delete"), {"name": name})
        deleted = await cur.fetchone()
    if deleted is None:
        raise NotFound(f"collection '{name}' does not exist")


async def unknown_language(conn: Conn, language: str) -> InvalidInput:
    cur = await conn.execute(query("text_search_configs"))
    known = ", ".join(str(row[0]) for row in await cur.fetchall())
    return InvalidInput(
        "language", f"unknown text-search configuration '{language}' (available: {known})"
    )
