"""The search pipeline: analyse, retrieve in parallel, fuse, threshold, merge, structured sources.

Shared by the HTTP API and the CLI. For one question:

1. Analyse: exact tokens (`signals`), decomposition into sub-queries (`decompose`).
2. Per sub-query, in parallel: keyword and vector retrieval, each on its own pooled connection
   (the query embedding is computed while the keyword query already runs), fused
   (`fusion`); the head of the fused list gets its absolute relevance and band (`relevance`).
   Search ranks: the top k come back whatever their relevance, unless the request (or the
   collection's `search_threshold`) asks for a threshold, which then cuts (`relevance.keep`;
   answers ask for the collection's `threshold`). The sub-query is routed (`router`) to the
   structured sources its words or meaning ask for.
3. Merge: the sub-queries' lists are interleaved rank by rank, so every sub-topic is in the
   top k; then the structured sources (`structured`: catalog items, installments) come first.

What the search will do is `plan` (the request resolved against the collection's defaults);
how it went, when asked, is `explain`; the wire types are `cari.schema.search`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec
import numpy as np
from psycopg import AsyncConnection, sql
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from cari import synonyms, typos
from cari.concurrency import all_or_none, both
from cari.db.keyword_damage import Damaged
from cari.db.keyword_engine import KeywordEngine
from cari.db.queries import query
from cari.db.replicas import Node, Reads
from cari.db.vector_space import Space, space
from cari.embed import Embedders
from cari.errors import (
    CollectionMoved,
    EmbedderBusy,
    EmbedderUnavailable,
    InvalidInput,
    NotFound,
    RerankUnavailable,
)
from cari.observability import metrics, tracing
from cari.schema.search import Explain, RetrieverHit, SearchRequest, SearchResponse, SearchResult
from cari.search import bm25, highlights, lexemes, relevance, signals, structured
from cari.search.collection_rows import CollectionRows
from cari.search.decompose import CollectionVocabulary, Decomposition, decompose, propose
from cari.search.explain import explain
from cari.search.filters import compile_filters
from cari.search.fusion import Candidate, Fused, fuse, weighed
from cari.search.lexemes import Lexemes
from cari.search.plan import Analysis, Part, Plan, SearchCollection
from cari.search.plan import plan as resolve
from cari.search.query_vectors import QueryVectors
from cari.search.rerank import Reranker
from cari.search.router import Keywords, Router
from cari.settings import Settings

# Of a search's embedding budget, what is kept for the work after the embedding wait when it
# gives up (fusion, relevance, the chunks' fetch and highlights: 10-40 ms measured at 100k
# chunks on 2 busy cores), so that a degraded hybrid search still answers within the budget.
ANSWER_RESERVE_S = 0.15
T = TypeVar("T")
Conn = AsyncConnection[Any]


@dataclass(frozen=True, slots=True)
class _Model:
    """An embedder as searches use it: its query vectors, its router, its vectors' index."""

    vectors: QueryVectors
    router: Router
    space: Space
    scale: relevance.Scale  # its cosines as relevance


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
        self._common_words: frozenset[str] | None = None  # typo tolerance's, read on first use
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
        token, when given) or the primary (`cari.db.replicas`)."""
        return await self.reads.run(
            token, lambda node: self.search_on(node, collection_name, request)
        )

    async def search_on(
        self,
        node: Node,
        collection_name: str,
        request: SearchRequest,
        *,
        support: float = relevance.SUPPORT,
    ) -> SearchResponse:
        """Search with every statement on `node`; once more, from the start, when the collection
        was moved to another embedder meanwhile (`cari reembed` finishing). `support`: the share
        of a threshold a chunk beside one that reaches it needs (an answer's sources: all of
        it)."""
        try:
            return await self._search_on(node, collection_name, request, None, support)
        except CollectionMoved as moved:
            return await self._search_on(node, collection_name, request, moved.collection, support)

    async def _search_on(
        self,
        node: Node,
        collection_name: str,
        request: SearchRequest,
        collection: SearchCollection | None,
        support: float,
    ) -> SearchResponse:
        started = time.perf_counter()
        began = time.monotonic()  # the embedding wait's deadline is counted from here
        pool = node.pool
        text = _query_text(request)
        filters = compile_filters(request.filters)
        if collection is None:
            collection = await self._collection(pool, collection_name)
        exact = signals.detect(text)
        warnings: list[str] = []
        rerank = self._reranks(request, warnings)
        top_k = request.top_k or collection.top_k
        # The reranker reorders more fused chunks than are returned: that is its use.
        retrieved = max(top_k, self.settings.rerank_candidates) if rerank else top_k
        boosted = bool(exact.exact_tokens)
        plan = resolve(
            request, collection, self.settings, retrieved, boosted=boosted, support=support
        )
        timings: dict[str, float] = {}
        decomposition = await self._decomposition(pool, text, collection, request, timings)
        asked = Analysis(text, exact, decomposition)
        parts = [Part(part) for part in decomposition.parts]
        degraded = await self._retrieve_parts(pool, parts, collection, plan, filters, began)
        if degraded:
            warnings.append(f"vector search skipped, keyword results only: {degraded[0]}")
            degraded = ["vector"]
        if damaged := sorted({block for part in parts for block in part.damaged}):
            warnings.append(bm25.damage_warning(collection.name, damaged))
        _slowest(parts, timings)

        merged = _interleave([part.kept for part in parts], plan.top_k)

        async def ranked() -> list[SearchResult]:
            chunks = await _timed(timings, "fetch", self._chunk_results(pool, merged, parts))
            if rerank and chunks:
                chunks = await _timed(
                    timings, "rerank", self._rerank(text, chunks, top_k, warnings)
                )
            return chunks[:top_k]

        routes = list(_union_routes(parts))
        if request.structured and set(routes) - {"knowledge"}:
            # The structured sources need the routes, not the chunks: found side by side.
            chunks, found = await both(
                ranked(),
                _timed(
                    timings,
                    "structured",
                    self._structured(pool, collection, plan, text, parts, top_k),
                ),
            )
        else:
            chunks, found = await ranked(), structured.Found([], {})
        timings["total"] = (time.perf_counter() - started) * 1000
        metrics.observe_search(plan.mode, timings, degraded)
        return SearchResponse(
            query=request.query,
            mode=plan.mode,
            signal=exact.name,
            routes=routes,
            sub_queries=list(decomposition.parts),
            results=[*(_structured_result(s) for s in found.sources), *chunks],
            degraded=degraded,
            warnings=warnings,
            explain=(
                await self._explain(node, collection, request, asked, plan, parts, found, timings)
                if request.explain
                else None
            ),
        )

    def _reranks(self, request: SearchRequest, warnings: list[str]) -> bool:
        """Whether the fused chunks are reranked: asked, and a reranker is configured."""
        if request.rerank and self.reranker is None:
            warnings.append("no reranker is configured (CARI_RERANK_BASE_URL): fused order kept")
        return request.rerank and self.reranker is not None

    async def _decomposition(
        self,
        pool: AsyncConnectionPool,
        text: str,
        collection: SearchCollection,
        request: SearchRequest,
        timings: dict[str, float],
    ) -> Decomposition:
        if not request.decompose:
            return Decomposition((text,), None, None)
        return await _timed(timings, "decompose", self._decompose(pool, text, collection))

    async def _retrieve_parts(
        self,
        pool: AsyncConnectionPool,
        parts: Sequence[Part],
        collection: SearchCollection,
        plan: Plan,
        filters: tuple[sql.Composable, dict[str, Any]],
        began: float,
    ) -> list[str]:
        """Retrieve every sub-query's part side by side; the reasons vector search was skipped
        (hybrid searches fall back to keywords when the embedder fails)."""
        fragment, filter_params = filters
        params = {**filter_params, "collection_id": collection.id, "candidates": plan.candidates}
        keywords = Keywords(collection.pricing_keywords, collection.financing_keywords)
        degraded: list[str] = []
        await all_or_none(
            *(
                self._retrieve(
                    pool, part, collection, plan, fragment, params, keywords, degraded, began
                )
                for part in parts
            )
        )
        return degraded

    async def _structured(
        self,
        pool: AsyncConnectionPool,
        collection: SearchCollection,
        plan: Plan,
        text: str,
        parts: Sequence[Part],
        top_k: int,
    ) -> structured.Found:
        return await structured.sources(
            pool,
            collection.id,
            text,
            [(p.text, p.vector, p.routing) for p in parts if p.routing is not None],
            next((p.space for p in parts if p.space is not None), None),
            # A product comes first only when named clearly enough for an answer.
            collection.threshold if plan.threshold is None else plan.threshold,
            top_k,
        )

    async def _explain(
        self,
        node: Node,
        collection: SearchCollection,
        request: SearchRequest,
        asked: Analysis,
        plan: Plan,
        parts: Sequence[Part],
        found: structured.Found,
        timings: dict[str, float],
    ) -> Explain:
        explained = explain(
            served_by=node.name,
            request=request,
            plan=plan,
            exact=asked.exact,
            decomposition=asked.decomposition,
            parts=parts,
            routes=_union_routes(parts),
            structured=found.explain,
            timings=timings,
            keyword_engine=str(self.keyword_engine.known or "unknown"),
            default_scale=self._models[None].scale,
        )
        async with node.pool.connection() as conn:
            cur = await conn.execute(
                query("relevance_fit_coverage"), {"collection_id": collection.id}
            )
            if (covered := await cur.fetchone()) is not None:
                scale = explained.relevance_scale
                scale.fitted_chunks = None if covered[0] is None else int(covered[0])
                scale.chunks = int(covered[1])
            explained.synonyms = await synonyms.fired(conn, collection.id, asked.text)
            explained.corrections = await typos.corrections(conn, collection.id, asked.text)
        return explained

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
        self, pool: AsyncConnectionPool, text: str, collection: SearchCollection
    ) -> Decomposition:
        if propose(text) is None:  # nothing to split: no database round trip
            return Decomposition((text,), None, None)
        async with pool.connection() as conn:
            return await decompose(text, CollectionVocabulary(conn, collection.id))

    async def _retrieve(
        self,
        pool: AsyncConnectionPool,
        part: Part,
        collection: SearchCollection,
        plan: Plan,
        filters: sql.Composable,
        params: dict[str, Any],
        keywords: Keywords,
        degraded: list[str],
        began: float,
    ) -> None:
        """Fill `part`: its fused chunks (those a threshold keeps, when one is asked), its
        routing, its figures."""

        # The question's lexemes, read once: keyword search weighs them (read on its connection,
        # before its statement), the vector side embeds the words they respell, the relevance
        # evidence and the highlights read them.
        analysis: asyncio.Future[Lexemes] = asyncio.get_running_loop().create_future()

        async def analyse(conn: Conn) -> Lexemes:
            try:
                part.lexemes = await _timed(
                    part.timings, "lexemes", lexemes.analyse(conn, collection.id, part.text)
                )
            except Exception as exc:
                analysis.set_exception(exc)  # the vector side, waiting for it, fails alike
                raise
            analysis.set_result(part.lexemes)
            return part.lexemes

        async def analysed() -> None:  # without keyword search, its analysis alone
            try:
                async with pool.connection() as conn:
                    await analyse(conn)
            finally:
                analysis.cancel()  # no connection, or cancelled: the wait for it ends too

        async def keyword() -> list[Candidate]:
            try:
                found = await _timed(
                    part.timings,
                    "keyword",  # the analysis and the statement, as a keyword search takes
                    self._keyword(pool, analyse, collection, filters, params),
                )
            finally:
                analysis.cancel()  # no connection, or cancelled: the wait for it ends too
            part.postings_read = found.postings_read
            part.keyword_ceiling = found.ceiling
            part.damaged = found.damaged
            return found.candidates

        async def vector() -> list[Candidate]:
            model = self._model(collection.embedder)
            # The search, not only the embedding, answers within the budget: the wait ends in
            # time for what follows it (a degraded hybrid search took 2.02 s of a 2 s budget).
            budget = model.vectors.timeout_s
            deadline = began + budget - min(ANSWER_RESERVE_S, budget / 4)
            part.embedded = await self._respelled(pool, collection, part, analysis)
            vector, part.cached = await _timed(
                part.timings, "embed", model.vectors.get(part.embedded, deadline)
            )
            part.vector, part.space = vector, model.space
            found, part.applied_ef = await _timed(
                part.timings,
                "vector",
                self._vector(pool, vector, model.space, plan.ef_search, filters, params),
            )
            if not found:  # none of this width: a move may have replaced them all
                await self._unmoved(pool, collection)
            return found

        jobs: dict[str, Awaitable[list[Candidate]]] = {}
        if plan.mode in ("hybrid", "keyword"):
            jobs["keyword"] = keyword()
        if plan.mode in ("hybrid", "vector"):
            jobs["vector"] = vector()
        lists = asyncio.gather(*jobs.values(), return_exceptions=True)
        try:
            if "keyword" in jobs:
                outcomes = await lists
            else:
                outcomes, _ = await asyncio.gather(lists, analysed())
        finally:
            if analysis.done() and not analysis.cancelled():
                analysis.exception()  # read: its error is the search's, raised by who read it
        for name, outcome in zip(jobs, outcomes, strict=True):
            if isinstance(outcome, EmbedderUnavailable | EmbedderBusy) and plan.mode == "hybrid":
                degraded.append(outcome.message)
            elif isinstance(outcome, BaseException):
                raise outcome
            else:
                part.lists[name] = outcome

        with _stage(part.timings, "fuse"):
            part.weights = weighed(plan.weights, part.lists, plan.candidates, part.keyword_ceiling)
            head = fuse(part.lists, part.weights, plan.method, plan.rrf_k, plan.depth)
        async with pool.connection() as conn:
            part.evidence = await _timed(
                part.timings,
                "relevance",
                relevance.evidence(
                    conn, collection.id, part.lexemes, part.vector, [f.chunk_id for f in head]
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
            kept = relevance.keep(scores, plan.threshold, plan.support)
        for fused, keeps in zip(head, kept, strict=True):
            (part.kept if keeps else part.dropped).append(fused)
        del part.kept[plan.top_k :]
        part.routing = await _timed(
            part.timings, "route", model.router.route(part.text, part.vector, keywords)
        )

    async def _respelled(
        self,
        pool: AsyncConnectionPool,
        collection: SearchCollection,
        part: Part,
        analysis: asyncio.Future[Lexemes],
    ) -> str:
        """The text the vector side embeds: `part`'s, its misspelled words as keyword search
        reads them where the collection corrects typos; the embedding waits for the question's
        `analysis` only where a word could be respelled."""
        if collection.typo_weight <= 0:
            return part.text
        if self._common_words is None:
            async with pool.connection() as conn:
                self._common_words = await typos.common_words(conn)
        if not typos.may_respell(part.text, self._common_words):
            return part.text
        # Shielded: a wait cancelled (the search's deadline) leaves the analysis to its reader.
        asked = await _timed(part.timings, "respell", asyncio.shield(analysis))
        return typos.respelled(part.text, asked.respelled)

    async def _unmoved(self, pool: AsyncConnectionPool, searched: SearchCollection) -> None:
        """Raise CollectionMoved when `searched`, the row the search read, names an embedder
        that its collection no longer has (the row may be kept from before the move, or the
        move may have committed since it was read)."""
        now = await self.collections.read(pool, searched.name)
        if now is not None and now.embedder != searched.embedder:
            raise CollectionMoved(now)

    async def _collection(self, pool: AsyncConnectionPool, name: str) -> SearchCollection:
        found = await self.collections.get(pool, name)
        if found is None:
            raise NotFound(f"collection '{name}' does not exist")
        return found

    async def _keyword(
        self,
        pool: AsyncConnectionPool,
        analyse: Callable[[Conn], Awaitable[Lexemes]],
        collection: SearchCollection,
        filters: sql.Composable,
        params: dict[str, Any],
    ) -> bm25.KeywordResult:
        async with pool.connection() as conn:
            asked = await analyse(conn)
            engine = await self.keyword_engine.current(conn)
            found = await bm25.search_lexemes(
                conn,
                collection.id,
                asked,
                candidates=params["candidates"],
                filters=filters,
                params=params,
                engine=engine.name,
            )
        if found.damaged:
            bm25.met_damage(
                self.keyword_engine.damage, Damaged(collection.id, collection.name, found.damaged)
            )
        return found

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
        merged: list[tuple[Fused, int]],
        parts: Sequence[Part],
    ) -> list[SearchResult]:
        if not merged:
            return []
        ids = [f.chunk_id for f, _ in merged]
        async with pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(
                query("chunks_for_results"),
                {"ids": ids, **highlights.params(p.lexemes for p in parts)},
            )
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


def _query_text(request: SearchRequest) -> str:
    # PostgreSQL text cannot hold NUL; it carries no meaning in a query anyway.
    text = request.query.replace("\x00", " ").strip()
    if not text:
        raise InvalidInput("query", "is empty")
    return text


def _slowest(parts: Sequence[Part], timings: dict[str, float]) -> None:
    """The parts' stages into `timings`: they ran side by side, so each stage takes as long as
    its slowest part."""
    for part in parts:
        for stage, ms in part.timings.items():
            timings[stage] = max(timings.get(stage, 0.0), ms)


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


def _union_routes(parts: Sequence[Part]) -> dict[str, list[str]]:
    """Route -> the evidence from each sub-query that routed to it."""
    routes: dict[str, list[str]] = {}
    for part in parts:
        if part.routing is not None:
            for name in part.routing.routes:
                routes.setdefault(name, []).append(part.routing.evidence[name])
    return routes


def _structured_result(source: structured.StructuredSource) -> SearchResult:
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
