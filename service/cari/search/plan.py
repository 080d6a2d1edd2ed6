"""What one search will do: its collection's settings as searches read them, the request
resolved against them and the server's defaults (`Plan`), the query as analysed (`Analysis`),
and each sub-query's retrieval as it fills in (`Part`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cari.db.keyword_damage import DamagedBlock
from cari.db.vector_space import Space
from cari.limits import Method, Mode
from cari.schema.search import EfSearchSource, SearchRequest
from cari.search import relevance, signals
from cari.search.decompose import Decomposition
from cari.search.fusion import Candidate, Fused
from cari.search.lexemes import Lexemes
from cari.search.router import Routing
from cari.settings import Settings

EVIDENCE_DEPTH = 10  # fused chunks weighed per sub-query under a threshold, at least


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchCollection:
    """A collection as searches read it: `collection_for_search`'s row, by column name."""

    id: int
    search_mode: Mode
    fusion: Method
    vector_weight: float
    keyword_weight: float
    rrf_k: int
    top_k: int
    threshold: float  # answers'
    search_threshold: float | None  # searches': None, no cut
    pricing_keywords: list[str]
    financing_keywords: list[str]
    embedder: str | None  # None: the default one
    typo_weight: float  # 0: no typo corrected, and the vector side embeds the question as typed
    ef_search: int | None  # None: the server's
    # Its relevance scale: set for it (wins), fitted to it (cari.search.fit; None when absent
    # or fitted for another embedder), else the embedder's.
    relevance_cosine_floor: float | None
    relevance_cosine_ceiling: float | None
    fit_floor: float | None
    fit_ceiling: float | None
    name: str

    def scale(self, configured: relevance.Scale) -> tuple[relevance.Scale, str]:
        """Its relevance scale and where it comes from: "collection", "fit" or "settings"."""
        floor, ceiling = self.relevance_cosine_floor, self.relevance_cosine_ceiling
        if floor is not None and ceiling is not None:
            return relevance.Scale(floor, ceiling), "collection"
        if self.fit_floor is not None and self.fit_ceiling is not None:
            return relevance.Scale(self.fit_floor, self.fit_ceiling), "fit"
        return configured, "settings"


@dataclass(frozen=True, slots=True)
class Plan:
    """The request resolved against the collection's and the server's defaults."""

    mode: Mode
    method: Method
    weights: dict[str, float]
    rrf_k: int
    top_k: int
    threshold: float | None  # None: no cut, the top k ranked
    candidates: int
    ef_search: int
    ef_search_source: EfSearchSource
    depth: int  # fused chunks whose relevance is weighed, per sub-query
    # The share of the threshold a chunk beside one that reaches it needs (relevance.keep):
    # a search's SUPPORT, an answer's ANSWER_SUPPORT.
    support: float = relevance.SUPPORT


def plan(
    request: SearchRequest,
    collection: SearchCollection,
    settings: Settings,
    top_k: int,
    *,
    boosted: bool,
    support: float = relevance.SUPPORT,
) -> Plan:
    """`boosted`: the query holds exact tokens, so keyword search weighs more (the settings'
    `exact_token_*_boost`)."""
    base = {
        "keyword": _pick(request.keyword_weight, collection.keyword_weight),
        "vector": _pick(request.vector_weight, collection.vector_weight),
    }
    boost = (
        {
            "keyword": settings.exact_token_keyword_boost,
            "vector": settings.exact_token_vector_boost,
        }
        if boosted
        else {"keyword": 1.0, "vector": 1.0}
    )
    mode: Mode = request.mode or collection.search_mode
    threshold = collection.search_threshold if request.threshold is None else request.threshold
    # A threshold may drop weighed chunks, and those past the top k take their place; without
    # one, only the top k are returned, so only they are weighed (its statement is ~20 % faster
    # for 10 chunks than for 20).
    depth = top_k if threshold is None else max(2 * top_k, EVIDENCE_DEPTH)
    ef_search, ef_search_source = _ef_search(request, collection, settings)
    candidates = request.candidates or settings.search_candidates
    if mode != "hybrid":
        # A lone list is returned as it comes: candidates past those weighed are not used.
        candidates = min(candidates, depth)
    return Plan(
        mode=mode,
        method=request.fusion or collection.fusion,
        weights={name: base[name] * boost[name] for name in base},
        rrf_k=request.rrf_k or collection.rrf_k,
        top_k=top_k,
        threshold=threshold,
        candidates=candidates,
        ef_search=ef_search,
        ef_search_source=ef_search_source,
        depth=depth,
        support=support,
    )


def _ef_search(
    request: SearchRequest, collection: SearchCollection, settings: Settings
) -> tuple[int, EfSearchSource]:
    if request.ef_search is not None:
        return request.ef_search, "request"
    if collection.ef_search is not None:
        return collection.ef_search, "collection"
    return settings.hnsw_ef_search, "settings"


def _pick(requested: float | None, default: float) -> float:
    return default if requested is None else requested


@dataclass(frozen=True, slots=True)
class Analysis:
    """The query as analysed: its text, its exact tokens, its sub-queries."""

    text: str
    exact: signals.Signal
    decomposition: Decomposition


@dataclass(slots=True)
class Part:
    """One sub-query's retrieval."""

    text: str
    kept: list[Fused] = field(default_factory=list)
    scored: dict[int, float] = field(default_factory=dict)  # chunk -> relevance
    evidence: dict[int, relevance.Evidence] = field(default_factory=dict)
    dropped: list[Fused] = field(default_factory=list)
    lists: dict[str, list[Candidate]] = field(default_factory=dict)
    embedded: str | None = None  # the text the vector side embedded (typos respelled)
    vector: np.ndarray | None = None
    space: Space | None = None  # the vector's
    scale: relevance.Scale | None = None  # how its evidence was weighed
    scale_source: str = "settings"  # where that scale comes from (SearchCollection.scale)
    cached: bool = False
    applied_ef: str | None = None
    postings_read: int | None = None
    keyword_ceiling: float = 0.0  # what its keyword search could score at best (bm25)
    weights: dict[str, float] | None = None  # what its lists were fused with
    damaged: tuple[DamagedBlock, ...] = ()  # of the keyword index, met by its keyword search
    lexemes: Lexemes = field(default_factory=Lexemes)  # what it looked for
    routing: Routing | None = None
    timings: dict[str, float] = field(default_factory=dict)
