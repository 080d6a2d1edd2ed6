"""The search pipeline: analyse, retrieve in parallel, fuse, threshold, merge, structured sources.

Shared by the HTTP API and the CLI. For one question:

1. Analyse: exact tokens (`intent`), decomposition into sub-queries (`decompose`).
2. Per sub-query, in parallel: keyword and vector retrieval, each on its own pooled connection
   (the query embedding is computed while the keyword query already runs), fused
   (`fusion`); the head of the fused list gets its absolute relevance and band (`relevance`).
   Search ranks: the top k come back whatever their relevance, unless the request (or the
   collection's `search_threshold`) asks for a threshold, which then cuts (`relevance.keep`;
   answers ask for the collection's `threshold`). The sub-query is routed (`router`) to the
   structured sources its words or meaning ask for.
3. Merge: the sub-queries' lists are interleaved rank by rank, so every sub-topic is in the
   top k; then the structured sources (`structured`: catalog items, installments) come first.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import msgspec
import numpy as np
from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from cari import metrics, synonyms, tracing, typos
from cari.embed import Embedders
from cari.errors import (
    EmbedderBusy,
    EmbedderUnavailable,
    InvalidInput,
    NotFound,
    RerankUnavailable,
)
from cari.keyword_engine import KeywordEngine
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
from cari.queries import query
from cari.replicas import Node, Reads
from cari.search import bm25, highlights, relevance, structured
from cari.search import intent as intents
from cari.search.collection_rows import CollectionRows
from cari.search.decompose import CollectionVocabulary, Decomposition, decompose, propose
from cari.search.filters import compile_filters
from cari.search.fusion import Candidate, Fused, fuse
from cari.search.query_vectors import QueryVectors
from cari.search.rerank import Reranker
from cari.search.router import Keywords, Router, Routing
from cari.settings import Settings
from cari.vector_space import Space, space

Kind = Literal["chunk", "catalog", "financing"]
# Of a search's embedding budget, what is kept for the work after the embedding wait when it
# gives up (fusion, relevance, the chunks' fetch and highlights: 10-40 ms measured at 100k
# chunks on 2 busy cores), so that a degraded hybrid search still answers within the budget.
ANSWER_RESERVE_S = 0.15
T = TypeVar("T")
EVIDENCE_DEPTH = 10  # fused chunks weighed per sub-query, at least: room for the threshold


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
    kind: Kind
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
    intent: str
    intents: list[str]
    sub_queries: list[str]
    results: list[SearchResult]
    degraded: list[str]
    warnings: list[str]
    explain: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class _Collection:
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
    # Its relevance scale: set for it (wins), fitted to it (cari.search.fit; None when absent
    # or fitted for another embedder), else the embedder's.
    set_floor: float | None
    set_ceiling: float | None
    fit_floor: float | None
    fit_ceiling: float | None

    def scale(self, configured: relevance.Scale) -> tuple[relevance.Scale, str]:
        """Its relevance scale and where it comes from: "collection", "fit" or "settings"."""
        if self.set_floor is not None and self.set_ceiling is not None:
            return relevance.Scale(self.set_floor, self.set_ceiling), "collection"
        if self.fit_floor is not None and self.fit_ceiling is not None:
            return relevance.Scale(self.fit_floor, self.fit_ceiling), "fit"
        return configured, "settings"


@dataclass(frozen=True, slots=True)
class _Model:
    """An embedder as searches use it: its query vectors, its router, its vectors' index."""

    vectors: QueryVectors
    router: Router
    space: Space
    scale: relevance.Scale  # its cosines as relevance


@dataclass(frozen=True, slots=True)
class _Plan:
    """The request resolved against the collection's and the server's defaults."""

    mode: Mode
    method: Method
    weights: dict[str, float]
    rrf_k: int
    top_k: int
    threshold: float | None  # None: no cut, the top k ranked
    candidates: int
    ef_search: int
    depth: int  # fused chunks whose relevance is weighed, per sub-query


@dataclass(slots=True)
class _Part:
    """One sub-query's retrieval."""

    text: str
    kept: list[Fused] = field(default_factory=list)
    scored: dict[int, float] = field(default_factory=dict)  # chunk -> relevance
    evidence: dict[int, relevance.Evidence] = field(default_factory=dict)
    dropped: list[Fused] = field(default_factory=list)
    lists: dict[str, list[Candidate]] = field(default_factory=dict)
    vector: np.ndarray | None = None
    space: Space | None = None  # the vector's
    scale: relevance.Scale | None = None  # how its evidence was weighed
    scale_source: str = "settings"  # where that scale comes from (_Collection.scale)
    cached: bool = False
    applied_ef: str | None = None
    postings_read: int | None = None
    routing: Routing | None = None
    timings: dict[str, float] = field(default_factory=dict)


class Searcher:
    def __init__(
        self,
        reads: Reads,
        embedders: Embedders,
        settings: Settings,
        *,
        collections: CollectionRows,
        keyword_engine: KeywordEngine,
        reranker: Reranker | None = None,
    ) -> None:
        self.reads = reads  # the servers searches run on: a replica, or the primary
        self.settings = settings
        self.reranker = reranker  # not owned: the runtime closes it
        self.embedders = embedders
        self.collections = collections  # kept while a serving process listens (the app)
        self._models: dict[str | None, _Model] = {}
        self.keyword_engine = keyword_engine  # the extension, or the SQL statement
        default = self._model(None)
        self.vectors = default.vectors  # the default embedder's, which metrics report
        self.router = default.router

    def _model(self, embedder: str | None) -> _Model:
        """The named embedder's query side, built on first use (EmbedderUnavailable if no such
        embedder is configured)."""
        if (model := self._models.get(embedder)) is None:
            built = self.embedders.get(embedder)
            timeout = self.settings.embedding_query_timeout_s
            model = _Model(
                QueryVectors(built, self.settings.query_cache_size, timeout),
                Router(built),
                space(built.dimension, self.settings),
                relevance.Scale(*self.settings.cosine_scale(embedder)),
            )
            self._models[embedder] = model
        return model

    async def search(
        self, collection_name: str, request: SearchRequest, *, token: int | None = None
    ) -> SearchResponse:
        """Search on a read replica (one that has replayed `token`, a write's consistency
        token, when given) or the primary (`cari.replicas`)."""
        return await self.reads.run(
            token, lambda node: self.search_on(node, collection_name, request)
        )

    async def search_on(
        self, node: Node, collection_name: str, request: SearchRequest
    ) -> SearchResponse:
        """Search with every statement on `node`."""
        started = time.perf_counter()
        began = time.monotonic()  # the embedding wait's deadline is counted from here
        pool = node.pool
        # PostgreSQL text cannot hold NUL; it carries no meaning in a query anyway.
        text = request.query.replace("\x00", " ").strip()
        if not text:
            raise InvalidInput("query", "is empty")
        filters, filter_params = compile_filters(request.filters)
        collection = await self._collection(pool, collection_name)
        exact = intents.detect(text)
        warnings: list[str] = []
        rerank = request.rerank and self.reranker is not None
        if request.rerank and not rerank:
            warnings.append("no reranker is configured (CARI_RERANK_BASE_URL): fused order kept")
        top_k = request.top_k or collection.top_k
        # The reranker reorders more fused chunks than are returned: that is its use.
        retrieved = max(top_k, self.settings.rerank_candidates) if rerank else top_k
        plan = self._plan(request, collection, retrieved, boosted=bool(exact.exact_tokens))
        timings: dict[str, float] = {}
        if request.decompose:
            decomposition = await _timed(
                timings, "decompose", self._decompose(pool, text, collection)
            )
        else:
            decomposition = Decomposition((text,), None, None)
        params = {**filter_params, "collection_id": collection.id, "candidates": plan.candidates}
        keywords = Keywords(collection.pricing_keywords, collection.financing_keywords)
        degraded: list[str] = []
        parts = [_Part(part) for part in decomposition.parts]
        await asyncio.gather(
            *(
                self._retrieve(
                    pool, part, collection, plan, filters, params, keywords, degraded, began
                )
                for part in parts
            )
        )
        if degraded:
            warnings.append(f"vector search skipped, keyword results only: {degraded[0]}")
            degraded = ["vector"]
        for part in parts:  # stages ran side by side: each takes as long as its slowest part
            for stage, ms in part.timings.items():
                timings[stage] = max(timings.get(stage, 0.0), ms)

        merged = _interleave([part.kept for part in parts], plan.top_k)
        chunks = await _timed(timings, "fetch", self._chunk_results(pool, text, merged, parts))
        if rerank and chunks:
            chunks = await _timed(timings, "rerank", self._rerank(text, chunks, top_k, warnings))
        del chunks[top_k:]
        routes = _union_routes(parts)
        sources: list[SearchResult] = []
        structured_explain: dict[str, Any] = {}
        if request.structured and set(routes) - {"knowledge"}:
            found = await _timed(
                timings,
                "structured",
                structured.sources(
                    pool,
                    collection.id,
                    text,
                    [(p.text, p.vector, p.routing) for p in parts if p.routing is not None],
                    next((p.space for p in parts if p.space is not None), None),
                    # A product comes first only when named clearly enough for an answer.
                    collection.threshold if plan.threshold is None else plan.threshold,
                    top_k,
                ),
            )
            sources = [_structured_result(s) for s in found.sources]
            structured_explain = found.explain
        timings["total"] = (time.perf_counter() - started) * 1000
        metrics.observe_search(plan.mode, timings, degraded)

        explain = None
        if request.explain:
            explain = self._explain(
                node,
                request,
                plan,
                exact,
                decomposition,
                parts,
                routes,
                structured_explain,
                timings,
            )
            async with pool.connection() as conn:
                explain["synonyms"] = await synonyms.fired(conn, collection.id, text)
                explain["corrections"] = await typos.corrections(conn, collection.id, text)
        return SearchResponse(
            query=request.query,
            mode=plan.mode,
            intent=exact.name,
            intents=list(routes),
            sub_queries=list(decomposition.parts),
            results=[*sources, *chunks],
            degraded=degraded,
            warnings=warnings,
            explain=explain,
        )

    def _plan(
        self, request: SearchRequest, collection: _Collection, top_k: int, *, boosted: bool
    ) -> _Plan:
        base = {
            "keyword": _pick(request.keyword_weight, collection.keyword_weight),
            "vector": _pick(request.vector_weight, collection.vector_weight),
        }
        boost = (
            {
                "keyword": self.settings.intent_keyword_boost,
                "vector": self.settings.intent_vector_boost,
            }
            if boosted
            else {"keyword": 1.0, "vector": 1.0}
        )
        mode: Mode = request.mode or collection.search_mode
        depth = max(2 * top_k, EVIDENCE_DEPTH)
        candidates = request.candidates or self.settings.search_candidates
        if mode != "hybrid":
            # A lone list is returned as it comes: candidates past those weighed are not used.
            candidates = min(candidates, depth)
        return _Plan(
            mode=mode,
            method=request.fusion or collection.fusion,
            weights={name: base[name] * boost[name] for name in base},
            rrf_k=request.rrf_k or collection.rrf_k,
            top_k=top_k,
            threshold=(
                collection.search_threshold if request.threshold is None else request.threshold
            ),
            candidates=candidates,
            ef_search=request.ef_search or self.settings.hnsw_ef_search,
            depth=depth,
        )

    async def _rerank(
        self, question: str, chunks: list[SearchResult], top_k: int, warnings: list[str]
    ) -> list[SearchResult]:
        """The chunks in the reranker's order, each with its rerank rank and score; the fused
        order, with a warning, when the reranker fails."""
        assert self.reranker is not None
        texts = [f"{r.title}\n{r.content}" if r.title else r.content for r in chunks]
        try:
            order = await self.reranker.rerank(question, texts, top_k)
        except RerankUnavailable as exc:
            warnings.append(f"reranker unavailable, fused order kept: {exc.message}")
            return chunks
        reranked = []
        for rank, (index, score) in enumerate(order, 1):
            result = chunks[index]
            retrievers = {**result.retrievers, "rerank": RetrieverHit(rank, score)}
            reranked.append(msgspec.structs.replace(result, retrievers=retrievers))
        return reranked

    async def _decompose(
        self, pool: AsyncConnectionPool, text: str, collection: _Collection
    ) -> Decomposition:
        if propose(text) is None:  # nothing to split: no database round trip
            return Decomposition((text,), None, None)
        async with pool.connection() as conn:
            return await decompose(text, CollectionVocabulary(conn, collection.id))

    async def _retrieve(
        self,
        pool: AsyncConnectionPool,
        part: _Part,
        collection: _Collection,
        plan: _Plan,
        filters: sql.Composable,
        params: dict[str, Any],
        keywords: Keywords,
        degraded: list[str],
        began: float,
    ) -> None:
        """Fill `part`: its fused chunks (those a threshold keeps, when one is asked), its
        routing, its figures."""

        async def keyword() -> list[Candidate]:
            found = await _timed(
                part.timings,
                "keyword",
                self._keyword(pool, part.text, collection, filters, params),
            )
            part.postings_read = found.postings_read
            return found.candidates

        async def vector() -> list[Candidate]:
            model = self._model(collection.embedder)
            # The search, not only the embedding, answers within the budget: the wait ends in
            # time for what follows it (a degraded hybrid search took 2.02 s of a 2 s budget).
            budget = model.vectors.timeout_s
            deadline = began + budget - min(ANSWER_RESERVE_S, budget / 4)
            vector, part.cached = await _timed(
                part.timings, "embed", model.vectors.get(part.text, deadline)
            )
            part.vector, part.space = vector, model.space
            found, part.applied_ef = await _timed(
                part.timings,
                "vector",
                self._vector(pool, vector, model.space, plan.ef_search, filters, params),
            )
            return found

        jobs: dict[str, Awaitable[list[Candidate]]] = {}
        if plan.mode in ("hybrid", "keyword"):
            jobs["keyword"] = keyword()
        if plan.mode in ("hybrid", "vector"):
            jobs["vector"] = vector()
        outcomes = await asyncio.gather(*jobs.values(), return_exceptions=True)
        for name, outcome in zip(jobs, outcomes, strict=True):
            if isinstance(outcome, EmbedderUnavailable | EmbedderBusy) and plan.mode == "hybrid":
                degraded.append(outcome.message)
            elif isinstance(outcome, BaseException):
                raise outcome
            else:
                part.lists[name] = outcome

        with _stage(part.timings, "fuse"):
            head = fuse(part.lists, plan.weights, plan.method, plan.rrf_k)[: plan.depth]
        async with pool.connection() as conn:
            part.evidence = await _timed(
                part.timings,
                "relevance",
                relevance.evidence(
                    conn, collection.id, part.text, part.vector, [f.chunk_id for f in head]
                ),
            )
        head = [f for f in head if f.chunk_id in part.evidence]  # not deleted meanwhile
        # Without the collection's embedder (keyword mode, or it failed) there is no vector:
        # any router routes by words alone, and any scale weighs coverage alone.
        model = self._models.get(collection.embedder, self._models[None])
        part.scale, part.scale_source = collection.scale(model.scale)
        for fused in head:
            part.scored[fused.chunk_id] = part.scale.relevance(part.evidence[fused.chunk_id])
        scores = [part.scored[f.chunk_id] for f in head]
        kept = [True] * len(head)
        if plan.threshold is not None:
            kept = relevance.keep(scores, plan.threshold)
        for fused, keeps in zip(head, kept, strict=True):
            (part.kept if keeps else part.dropped).append(fused)
        del part.kept[plan.top_k :]
        part.routing = await _timed(
            part.timings, "route", model.router.route(part.text, part.vector, keywords)
        )

    async def _collection(self, pool: AsyncConnectionPool, name: str) -> _Collection:
        row = await self.collections.get(pool, name)
        if row is None:
            raise NotFound(f"collection '{name}' does not exist")
        return _Collection(*row)

    async def _keyword(
        self,
        pool: AsyncConnectionPool,
        text: str,
        collection: _Collection,
        filters: sql.Composable,
        params: dict[str, Any],
    ) -> bm25.KeywordResult:
        async with pool.connection() as conn:
            engine = await self.keyword_engine.current(conn)
            return await bm25.search(
                conn,
                collection.id,
                text,
                candidates=params["candidates"],
                filters=filters,
                params=params,
                engine=engine.name,
            )

    async def _vector(
        self,
        pool: AsyncConnectionPool,
        vector: np.ndarray,
        space: Space,
        ef_search: int,
        filters: sql.Composable,
        params: dict[str, Any],
    ) -> tuple[list[Candidate], str | None]:
        statement = space.statement("search_vector", filters=filters, alias=sql.Identifier("c"))
        values = {**params, "vector": vector}
        async with pool.connection() as conn:
            if ef_search == self.settings.hnsw_ef_search:
                # The pool's connections have it already: one round trip, no transaction.
                # Never prepared: see Space.statement.
                cur = await conn.execute(statement, values, prepare=False)
            else:
                async with conn.transaction():
                    await conn.execute(query("search_vector_settings"), {"ef_search": ef_search})
                    cur = await conn.execute(statement, values, prepare=False)
            rows = await cur.fetchall()
        applied = str(rows[0][2]) if rows else None
        return [Candidate(int(r[0]), float(r[1])) for r in rows], applied

    async def _chunk_results(
        self,
        pool: AsyncConnectionPool,
        text: str,
        merged: list[tuple[Fused, int]],
        parts: Sequence[_Part],
    ) -> list[SearchResult]:
        if not merged:
            return []
        ids = [f.chunk_id for f, _ in merged]
        async with pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(query("chunks_for_results"), {"ids": ids, **highlights.params(text)})
            rows = {row["id"]: row for row in await cur.fetchall()}
        results = []
        for fused, index in merged:
            row = rows.get(fused.chunk_id)
            if row is None:  # deleted between retrieval and now
                continue
            results.append(
                SearchResult(
                    id=f"chunk:{fused.chunk_id}",
                    kind="chunk",
                    chunk_id=fused.chunk_id,
                    document_id=row["document_id"],
                    source=row["source"],
                    title=row["title"],
                    content=row["content"],
                    metadata=row["metadata"],
                    score=fused.score,
                    relevance=(score := round(parts[index].scored[fused.chunk_id], 4)),
                    band=relevance.band(score),  # of the relevance shown
                    retrievers={n: RetrieverHit(r, s) for n, (r, s) in fused.ranks.items()},
                    highlight=highlights.marked(row["highlight"]),
                )
            )
        return results

    def _explain(
        self,
        node: Node,
        request: SearchRequest,
        plan: _Plan,
        exact: intents.Intent,
        decomposition: Decomposition,
        parts: Sequence[_Part],
        routes: dict[str, list[str]],
        structured_explain: dict[str, Any],
        timings: dict[str, float],
    ) -> dict[str, Any]:
        first = parts[0]
        embedded = [p for p in parts if p.vector is not None]
        scale = first.scale or self._models[None].scale
        return {
            "served_by": node.name,  # primary, or the replica (cari.replicas)
            "mode": plan.mode,
            "intent": {
                "name": exact.name,
                "exact_tokens": [{"text": t.text, "kind": t.kind} for t in exact.exact_tokens],
            },
            "decomposition": {
                "sub_queries": list(decomposition.parts),
                "pattern": decomposition.pattern,
                "kept_whole_because": decomposition.reason,
            },
            "intents": routes,
            "fusion": plan.method,
            "weights": plan.weights,
            "rrf_k": plan.rrf_k,
            "top_k": plan.top_k,
            "threshold": plan.threshold,
            "relevance_scale": {
                "cosine_floor": scale.cosine_floor,
                "cosine_ceiling": scale.cosine_ceiling,
                "source": first.scale_source,
            },
            "candidates": {"requested": plan.candidates},
            "keyword_engine": str(self.keyword_engine.known or "unknown"),
            "ef_search": {"requested": plan.ef_search, "applied": first.applied_ef},
            "query_vector_cached": bool(embedded) and all(p.cached for p in embedded),
            "filters": request.filters or {},
            "sub_queries": [self._explain_part(p, plan) for p in parts],
            "structured": structured_explain,
            "timings_ms": {k: round(v, 3) for k, v in timings.items()},
        }

    def _explain_part(self, part: _Part, plan: _Plan) -> dict[str, Any]:
        scale = part.scale or self._models[None].scale

        def weighed(fused: Fused) -> dict[str, Any]:
            found = part.evidence[fused.chunk_id]
            score = round(part.scored[fused.chunk_id], 4)
            return {
                "id": f"chunk:{fused.chunk_id}",
                "relevance": score,
                "band": relevance.band(score),
                "cosine": None if found.cosine is None else round(found.cosine, 4),
                "dense": round(scale.dense(found.cosine), 4),
                "coverage": round(found.coverage, 4),
                "lexical": round(relevance.lexical(found.coverage), 4),
            }

        threshold = plan.threshold or 0.0  # no threshold drops nothing
        if part.kept:
            reason = f"relevance below {threshold * relevance.SUPPORT:g}, half the threshold"
        else:
            reason = f"no chunk reaches the threshold {threshold:g}: off-topic here"
        return {
            "query": part.text,
            "candidates": {name: len(found) for name, found in part.lists.items()},
            "keyword_postings_read": part.postings_read,
            "query_vector_cached": part.cached,
            "intents": {} if part.routing is None else part.routing.evidence,
            "kept": [weighed(f) for f in part.kept],
            "dropped": [{**weighed(f), "reason": reason} for f in part.dropped],
            "timings_ms": {k: round(v, 3) for k, v in part.timings.items()},
        }


def _interleave(lists: Sequence[list[Fused]], top_k: int) -> list[tuple[Fused, int]]:
    """Rank 1 of every list, then rank 2, ... each chunk once: every sub-topic is represented.
    Each entry keeps the index of the list it came from."""
    merged: list[tuple[Fused, int]] = []
    seen: set[int] = set()
    for rank in range(max((len(found) for found in lists), default=0)):
        for index, found in enumerate(lists):
            if rank < len(found) and found[rank].chunk_id not in seen:
                seen.add(found[rank].chunk_id)
                merged.append((found[rank], index))
    return merged[:top_k]


def _union_routes(parts: Sequence[_Part]) -> dict[str, list[str]]:
    """Intent -> the evidence from each sub-query that routed to it."""
    routes: dict[str, list[str]] = {}
    for part in parts:
        if part.routing is not None:
            for name in part.routing.intents:
                routes.setdefault(name, []).append(part.routing.evidence[name])
    return routes


def _structured_result(source: structured.Source) -> SearchResult:
    return SearchResult(
        id=source.id,
        kind=source.kind,
        title=source.title,
        content=source.content,
        metadata=source.metadata,
        score=source.relevance,
        relevance=round(source.relevance, 4),
        band=relevance.band(round(source.relevance, 4)),
        retrievers={n: RetrieverHit(r, s) for n, (r, s) in source.ranks.items()},
    )


def _pick(requested: float | None, default: float) -> float:
    return default if requested is None else requested


@contextmanager
def _stage(timings: dict[str, float], stage: str) -> Iterator[None]:
    """Time a stage (ms, into `timings`), and trace it as a span when traces are sent."""
    started = time.perf_counter()
    try:
        with tracing.span(stage):
            yield
    finally:
        timings[stage] = (time.perf_counter() - started) * 1000


async def _timed(timings: dict[str, float], stage: str, work: Awaitable[T]) -> T:
    with _stage(timings, stage):
        return await work
