"""Search (`POST …/search`): the request, the ranked results, and `explain`."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from cari.limits import (
    Band,
    Candidates,
    EfSearch,
    Method,
    Mode,
    QueryText,
    RrfK,
    Threshold,
    TopK,
    Weight,
)

ResultKind = Literal["chunk", "catalog", "financing"]
SignalName = Literal["exact_token", "general"]
TokenKind = Literal["sku", "error_code", "uuid", "hex_id", "version"]
# Where a search's ef_search came from: the request, the collection's setting, the server's.
EfSearchSource = Literal["request", "collection", "settings"]


class SearchRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A search; unset fields take the collection's (or the server's) defaults."""

    query: QueryText
    mode: Mode | None = None
    fusion: Method | None = None
    top_k: TopK | None = None
    threshold: Threshold | None = None
    candidates: Candidates | None = None
    ef_search: EfSearch | None = None
    vector_weight: Weight | None = None
    keyword_weight: Weight | None = None
    rrf_k: RrfK | None = None
    filters: dict[str, Any] | None = None
    decompose: bool = True
    structured: bool = True
    rerank: bool = False  # reorder the fused chunks with the configured reranker
    explain: bool = False


class RetrieverHit(msgspec.Struct):
    rank: int
    score: float


class SearchResult(msgspec.Struct, kw_only=True):
    """A source: a document chunk, a catalog item, or installments computed for a product."""

    id: str  # "chunk:<id>", "catalog:<sku>", "financing:<sku>": what an answer cites
    kind: ResultKind
    title: str
    content: str
    metadata: dict[str, Any]
    score: float  # chunks: the fused score; structured sources: their relevance
    relevance: float  # 0..1, absolute (cari.search.relevance)
    band: Band  # strong (relevance 0.5 and above), moderate (0.3 and above), weak
    retrievers: dict[str, RetrieverHit]
    chunk_id: int | None = None
    document_id: str | None = None
    source: str | None = None  # chunks: their document's `source` (a file, "faq", ...)
    # Chunks: the passage around the query's words, HTML with the matches in <mark> (the start
    # of the content when no word matches; cari.search.highlights). Others: None.
    highlight: str | None = None


class SearchResponse(msgspec.Struct):
    query: str
    mode: Mode
    signal: SignalName  # "exact_token" (the query names a SKU, error code, id…) or "general"
    routes: list[str]  # where the router sent it: "knowledge", then pricing, specs, financing
    sub_queries: list[str]
    results: list[SearchResult]
    degraded: list[str]
    warnings: list[str]
    explain: Explain | None = None


# -- explain: how a search found its results (`explain: true`) ------------------------------


class ExactToken(msgspec.Struct, frozen=True):
    """A token of the query to be matched exactly (`cari.search.signals`)."""

    text: str  # as it appears in the query
    kind: TokenKind


class ExactTokens(msgspec.Struct):
    """The query's signal and the exact tokens behind it."""

    name: SignalName
    exact_tokens: list[ExactToken]


class DecompositionExplain(msgspec.Struct):
    sub_queries: list[str]
    pattern: str | None  # e.g. "vs", "atau", "list"; None if not split
    kept_whole_because: str | None  # why a proposed split was refused


class ScaleExplain(msgspec.Struct):
    cosine_floor: float
    cosine_ceiling: float
    source: str  # "collection", "fit" or "settings"
    # What the collection's fit covers: the chunks it was fitted on (null: no fit) and the
    # collection's chunks now (the server refits once the fit covers less than 90 % of them).
    fitted_chunks: int | None = None
    chunks: int | None = None


class CandidatesExplain(msgspec.Struct):
    requested: int


class EfSearchExplain(msgspec.Struct):
    requested: int
    applied: str | None  # as the server read it inside the query
    source: EfSearchSource


class WeighedChunk(msgspec.Struct):
    """A fused chunk's relevance and the evidence it was weighed on."""

    id: str
    relevance: float
    band: Band
    cosine: float | None
    dense: float
    coverage: float
    specificity: float
    lexical: float


class DroppedChunk(WeighedChunk):
    reason: str


class SubQueryExplain(msgspec.Struct):
    query: str
    candidates: dict[str, int]  # per retriever
    keyword_postings_read: int | None
    query_vector_cached: bool
    routes: dict[str, str]  # route -> why it was chosen
    kept: list[WeighedChunk]
    dropped: list[DroppedChunk]
    timings_ms: dict[str, float]
    # The text the vector side embedded: the query with its misspelled words respelled as
    # keyword search reads them; null without a vector search.
    embedded_query: str | None = None
    # Damaged blocks of the keyword index its keyword search met (each named with what is
    # wrong): its keyword results were read from the chunks' own words instead, the same scores.
    keyword_damaged_blocks: list[str] | None = None
    # The weights its lists were fused with: the plan's, the keyword weight lowered for a short
    # list of weak matches (cari.search.fusion.weighed); null where nothing was fused.
    weights: dict[str, float] | None = None


class Explain(msgspec.Struct, kw_only=True):
    served_by: str  # primary, or the replica
    mode: Mode
    signal: ExactTokens
    decomposition: DecompositionExplain
    routes: dict[str, list[str]]  # route -> the evidence of each sub-query routed to it
    fusion: Method
    weights: dict[str, float]
    rrf_k: int
    top_k: int
    threshold: float | None
    relevance_scale: ScaleExplain
    candidates: CandidatesExplain
    keyword_engine: str
    ef_search: EfSearchExplain
    query_vector_cached: bool
    filters: dict[str, Any]
    sub_queries: list[SubQueryExplain]
    structured: dict[str, Any]  # the catalog and financing sources' own figures
    timings_ms: dict[str, float]
    synonyms: list[dict[str, Any]] = msgspec.field(default_factory=list)  # the rules it fired
    corrections: list[dict[str, Any]] = msgspec.field(default_factory=list)  # typos corrected
