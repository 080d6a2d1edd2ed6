"""Collections: named knowledge bases, each with its language and search defaults."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import msgspec
import psycopg
from psycopg import errors as pg_errors
from psycopg.rows import kwargs_row

from cari.errors import ConfigError, Conflict, InvalidInput, NotFound
from cari.limits import Method, Mode, RrfK, Threshold, TopK, Weight
from cari.queries import query
from cari.search import router
from cari.settings import EMBEDDER_NAME_PATTERN, Settings

Fusion = Annotated[
    Method,
    msgspec.Meta(
        description="rrf: weighted reciprocal rank fusion; minmax / zscore: the weighted mean of "
        "each retriever's scores normalised over its candidates."
    ),
]

# A slug: lower-case letters, digits, '-' and '_', starting with a letter or digit.
Name = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=63,
        pattern="^[a-z0-9][a-z0-9_-]*$",
        description="Slug: a-z, 0-9, '-', '_'; 1-63 characters, not starting with '-' or '_'.",
    ),
]
Language = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=63,
        pattern="^[A-Za-z_][A-Za-z0-9_]*$",
        description="PostgreSQL text-search configuration: simple, english, indonesian, ...",
    ),
]
K1 = Annotated[float, msgspec.Meta(ge=0, le=10, description="BM25 term-frequency saturation.")]
B = Annotated[float, msgspec.Meta(ge=0, le=1, description="BM25 length normalisation.")]
K3 = Annotated[
    float,
    msgspec.Meta(
        ge=0,
        le=1000,
        description="BM25 query-term saturation: a word the query says n times weighs "
        "n·(k3+1)/(k3+n); 0 counts it once, 1000 almost n times.",
    ),
]
TypoWeight = Annotated[
    float,
    msgspec.Meta(
        ge=0,
        lt=1,
        description="Typo tolerance: a query word the collection does not know also matches "
        "its closest known word, weighing this against an exact match; 0 turns it off.",
    ),
]
Keywords = Annotated[
    list[Annotated[str, msgspec.Meta(min_length=1, max_length=64)]],
    msgspec.Meta(max_length=500, description="Words or phrases; matched as whole words."),
]
NoInformation = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=1000,
        description="The answer when no source passes the threshold; unset: a default sentence "
        "in the question's language.",
    ),
]
EmbedderName = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=63,
        pattern=EMBEDDER_NAME_PATTERN,
        description="The embedder of the collection's vectors: 'local' (the bundled model) or "
        "a name from the server's CARI_EMBEDDERS; unset: the server's default embedder. "
        "`cari reembed --embedder` changes it.",
    ),
]
AnswerThreshold = Annotated[
    Threshold,
    msgspec.Meta(
        description="The least relevance (0-1) a source needs to reach an answer: when none "
        "reaches it, the answer is the `no_information` sentence."
    ),
]
SearchThreshold = Annotated[
    Threshold,
    msgspec.Meta(
        description="The least relevance (0-1) a search returns when the request sets no "
        "`threshold`; null (the default): searches cut nothing and return the top k ranked, "
        "each with its relevance and band."
    ),
]
TitleBoost = Annotated[
    float, msgspec.Meta(ge=0, le=100, description="How much a title word counts vs a body word.")
]


class RelevanceScale(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The query-chunk cosines at relevance 0.1 and 0.9 (cari.search.relevance)."""

    cosine_floor: Annotated[float, msgspec.Meta(ge=-1, lt=1)]
    cosine_ceiling: Annotated[float, msgspec.Meta(gt=-1, le=1)]


RelevanceScaleSetting = Annotated[
    RelevanceScale,
    msgspec.Meta(
        description="The relevance scale of this collection, winning over its fitted scale "
        "(`relevance_fit`) and the server's CARI_RELEVANCE_COSINE_*; null: the fit's."
    ),
]


class Collection(msgspec.Struct, kw_only=True):
    name: str
    language: str
    search_mode: Mode
    fusion: Method
    vector_weight: float
    keyword_weight: float
    rrf_k: int
    threshold: float  # what answers apply
    top_k: int
    bm25_k1: float
    bm25_b: float
    bm25_k3: float
    typo_weight: float
    title_boost: float
    pricing_keywords: list[str]
    financing_keywords: list[str]
    no_information: str | None
    # 'local', a CARI_EMBEDDERS name, or (for the default embedder, which follows CARI_EMBEDDER)
    # CARI_EMBEDDER's value; None only inside the server, before `named`.
    embedder: str | None
    dimensions: int
    next_embedder: str | None
    created_at: datetime
    updated_at: datetime
    search_threshold: float | None = None  # what searches apply; None: no cut
    relevance_scale: RelevanceScale | None = None  # set for the collection: wins over the fit
    relevance_fit: dict[str, Any] | None = None  # cari.search.fit: scale, chunks, embedder, when


class CollectionCreate(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    name: Name
    language: Language = "simple"
    search_mode: Mode = "hybrid"
    fusion: Fusion = "zscore"
    vector_weight: Weight = 1.0
    keyword_weight: Weight = 1.0
    rrf_k: RrfK = 60
    threshold: AnswerThreshold = 0.25
    search_threshold: SearchThreshold | None = None
    top_k: TopK = 5
    bm25_k1: K1 = 1.2
    bm25_b: B = 0.75
    bm25_k3: K3 = 1000.0
    typo_weight: TypoWeight = 0.0
    title_boost: TitleBoost = 3.0
    pricing_keywords: Keywords = msgspec.field(
        default_factory=lambda: list(router.PRICING_KEYWORDS)
    )
    financing_keywords: Keywords = msgspec.field(
        default_factory=lambda: list(router.FINANCING_KEYWORDS)
    )
    no_information: NoInformation | None = None
    embedder: EmbedderName | None = None


class CollectionUpdate(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Only the fields present change."""

    language: Language | msgspec.UnsetType = msgspec.UNSET
    search_mode: Mode | msgspec.UnsetType = msgspec.UNSET
    fusion: Fusion | msgspec.UnsetType = msgspec.UNSET
    vector_weight: Weight | msgspec.UnsetType = msgspec.UNSET
    keyword_weight: Weight | msgspec.UnsetType = msgspec.UNSET
    rrf_k: RrfK | msgspec.UnsetType = msgspec.UNSET
    threshold: AnswerThreshold | msgspec.UnsetType = msgspec.UNSET
    search_threshold: SearchThreshold | msgspec.UnsetType | None = msgspec.UNSET  # null: no cut
    top_k: TopK | msgspec.UnsetType = msgspec.UNSET
    bm25_k1: K1 | msgspec.UnsetType = msgspec.UNSET
    bm25_b: B | msgspec.UnsetType = msgspec.UNSET
    bm25_k3: K3 | msgspec.UnsetType = msgspec.UNSET
    typo_weight: TypoWeight | msgspec.UnsetType = msgspec.UNSET
    title_boost: TitleBoost | msgspec.UnsetType = msgspec.UNSET
    pricing_keywords: Keywords | msgspec.UnsetType = msgspec.UNSET
    financing_keywords: Keywords | msgspec.UnsetType = msgspec.UNSET
    no_information: NoInformation | msgspec.UnsetType | None = msgspec.UNSET  # null: the default
    relevance_scale: RelevanceScaleSetting | msgspec.UnsetType | None = msgspec.UNSET  # null: fit


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


async def create(conn: Conn, spec: CollectionCreate, settings: Settings) -> Collection:
    """Create the collection; its vectors get the width of the embedder it names."""
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
    params = {
        field: (None if value is msgspec.UNSET else value)
        for field, value in msgspec.structs.asdict(changes).items()
    }
    params["name"] = name
    # The fields that can be set back to NULL, so NULL cannot mean "unchanged" for them.
    params["no_information_set"] = changes.no_information is not msgspec.UNSET
    params["search_threshold_set"] = changes.search_threshold is not msgspec.UNSET
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
    await get(conn, name)
    cur = await conn.execute(query("bm25_check"), {"name": name})
    return {str(kind): int(count) for kind, count in await cur.fetchall()}


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
