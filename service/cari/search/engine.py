"""Hybrid search: keyword and vector retrieval in parallel, then fused (`cari.search.fusion`).

Shared by the HTTP API and the CLI. Each retriever runs on its own pooled connection; the query
embedding is computed while the keyword query already runs.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar

import msgspec
import numpy as np
from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from cari.embed import Embedder
from cari.errors import EmbedderUnavailable, InvalidInput, NotFound
from cari.queries import query
from cari.search import bm25
from cari.search import intent as intents
from cari.search.filters import compile_filters
from cari.search.fusion import Candidate, Fused, Method, fuse
from cari.settings import Settings

Mode = Literal["hybrid", "vector", "keyword"]
Weight = Annotated[float, msgspec.Meta(ge=0, le=100)]
T = TypeVar("T")


class SearchRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A search; unset fields take the collection's (or the server's) defaults."""

    query: Annotated[str, msgspec.Meta(max_length=4000)]
    mode: Mode | None = None
    fusion: Method | None = None
    top_k: Annotated[int, msgspec.Meta(ge=1, le=50)] | None = None
    candidates: Annotated[int, msgspec.Meta(ge=1, le=1000)] | None = None
    ef_search: Annotated[int, msgspec.Meta(ge=1, le=1000)] | None = None
    vector_weight: Weight | None = None
    keyword_weight: Weight | None = None
    rrf_k: Annotated[int, msgspec.Meta(ge=1, le=10_000)] | None = None
    filters: dict[str, Any] | None = None
    explain: bool = False


class RetrieverHit(msgspec.Struct):
    rank: int
    score: float


class SearchResult(msgspec.Struct):
    chunk_id: int
    document_id: str
    title: str
    content: str
    metadata: dict[str, Any]
    score: float
    retrievers: dict[str, RetrieverHit]


class SearchResponse(msgspec.Struct):
    query: str
    mode: Mode
    intent: str
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


class QueryVectors:
    """A small LRU cache of query embeddings: repeated queries are common."""

    def __init__(self, embedder: Embedder, size: int) -> None:
        self.embedder = embedder
        self.size = size
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()

    async def get(self, text: str) -> tuple[np.ndarray, bool]:
        """The vector, and whether it came from the cache."""
        if (vector := self._cache.get(text)) is not None:
            self._cache.move_to_end(text)
            return vector, True
        vector = await self.embedder.embed_query(text)
        self._cache[text] = vector
        if len(self._cache) > self.size:
            self._cache.popitem(last=False)
        return vector, False


class Searcher:
    def __init__(self, pool: AsyncConnectionPool, embedder: Embedder, settings: Settings) -> None:
        self.pool = pool
        self.settings = settings
        self.vectors = QueryVectors(embedder, settings.query_cache_size)

    async def search(self, collection_name: str, request: SearchRequest) -> SearchResponse:
        started = time.perf_counter()
        # PostgreSQL text cannot hold NUL; it carries no meaning in a query anyway.
        text = request.query.replace("\x00", " ").strip()
        if not text:
            raise InvalidInput("query", "is empty")
        filters, filter_params = compile_filters(request.filters)
        collection = await self._collection(collection_name)
        mode: Mode = request.mode or collection.search_mode
        found = intents.detect(text)
        base = {
            "keyword": _pick(request.keyword_weight, collection.keyword_weight),
            "vector": _pick(request.vector_weight, collection.vector_weight),
        }
        boost = (
            {
                "keyword": self.settings.intent_keyword_boost,
                "vector": self.settings.intent_vector_boost,
            }
            if found.exact_tokens
            else {"keyword": 1.0, "vector": 1.0}
        )
        weights = {name: base[name] * boost[name] for name in base}
        top_k = request.top_k or collection.top_k
        candidates = request.candidates or self.settings.search_candidates
        if mode != "hybrid":
            # A lone list is returned as it comes: candidates past top_k would be thrown away.
            candidates = min(candidates, top_k)
        ef_search = request.ef_search or self.settings.hnsw_ef_search
        params = {
            **filter_params,
            "collection_id": collection.id,
            "candidates": candidates,
        }
        timings: dict[str, float] = {}
        degraded: list[str] = []
        warnings: list[str] = []
        lists: dict[str, list[Candidate]] = {}
        applied_ef: str | None = None
        postings_read: int | None = None
        cached = False
        rrf_k = request.rrf_k or collection.rrf_k
        method = request.fusion or collection.fusion

        async def keyword() -> list[Candidate]:
            nonlocal postings_read
            found = await _timed(
                timings, "keyword", self._keyword(text, collection, filters, params)
            )
            postings_read = found.postings_read
            return found.candidates

        async def vector() -> tuple[list[Candidate], str | None]:
            nonlocal cached
            vector, cached = await _timed(timings, "embed", self.vectors.get(text))
            return await _timed(timings, "vector", self._vector(vector, ef_search, filters, params))

        jobs: dict[str, Awaitable[Any]] = {}
        if mode in ("hybrid", "keyword"):
            jobs["keyword"] = keyword()
        if mode in ("hybrid", "vector"):
            jobs["vector"] = vector()
        outcomes = await asyncio.gather(*jobs.values(), return_exceptions=True)
        for name, outcome in zip(jobs, outcomes, strict=True):
            if isinstance(outcome, EmbedderUnavailable) and mode == "hybrid":
                degraded.append("vector")
                warnings.append(f"vector search skipped, keyword results only: {outcome.message}")
            elif isinstance(outcome, BaseException):
                raise outcome
            elif name == "vector":
                lists["vector"], applied_ef = outcome
            else:
                lists["keyword"] = outcome

        fuse_started = time.perf_counter()
        fused = fuse(lists, weights, method, rrf_k)[:top_k]
        timings["fuse"] = (time.perf_counter() - fuse_started) * 1000
        results = await _timed(timings, "fetch", self._results(fused))
        timings["total"] = (time.perf_counter() - started) * 1000

        explain = None
        if request.explain:
            explain = {
                "mode": mode,
                "intent": {
                    "name": found.name,
                    "exact_tokens": [{"text": t.text, "kind": t.kind} for t in found.exact_tokens],
                },
                "fusion": method,
                "weights": weights,
                "base_weights": base,
                "rrf_k": rrf_k,
                "top_k": top_k,
                "candidates": {"requested": candidates, **{n: len(v) for n, v in lists.items()}},
                "ef_search": {"requested": ef_search, "applied": applied_ef},
                "keyword_postings_read": postings_read,
                "query_vector_cached": cached,
                "filters": request.filters or {},
                "timings_ms": {k: round(v, 3) for k, v in timings.items()},
            }
        return SearchResponse(
            query=request.query,
            mode=mode,
            intent=found.name,
            results=results,
            degraded=degraded,
            warnings=warnings,
            explain=explain,
        )

    async def _collection(self, name: str) -> _Collection:
        async with self.pool.connection() as conn:
            cur = await conn.execute(query("collection_for_search"), {"name": name})
            row = await cur.fetchone()
        if row is None:
            raise NotFound(f"collection '{name}' does not exist")
        return _Collection(*row)

    async def _keyword(
        self,
        text: str,
        collection: _Collection,
        filters: sql.Composable,
        params: dict[str, Any],
    ) -> bm25.KeywordResult:
        async with self.pool.connection() as conn:
            return await bm25.search(
                conn,
                collection.id,
                text,
                candidates=params["candidates"],
                filters=filters,
                params=params,
            )

    async def _vector(
        self, vector: np.ndarray, ef_search: int, filters: sql.Composable, params: dict[str, Any]
    ) -> tuple[list[Candidate], str | None]:
        statement = sql.SQL(query("search_vector")).format(filters=filters)
        async with self.pool.connection() as conn, conn.transaction():
            await conn.execute(query("search_vector_settings"), {"ef_search": ef_search})
            cur = await conn.execute(statement, {**params, "vector": vector})
            rows = await cur.fetchall()
        applied = str(rows[0][2]) if rows else None
        return [Candidate(int(r[0]), float(r[1])) for r in rows], applied

    async def _results(self, fused: list[Fused]) -> list[SearchResult]:
        if not fused:
            return []
        async with self.pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(query("chunks_for_results"), {"ids": [f.chunk_id for f in fused]})
            rows = {row["id"]: row for row in await cur.fetchall()}
        results = []
        for f in fused:
            row = rows.get(f.chunk_id)
            if row is None:  # deleted between retrieval and now
                continue
            results.append(
                SearchResult(
                    chunk_id=f.chunk_id,
                    document_id=row["document_id"],
                    title=row["title"],
                    content=row["content"],
                    metadata=row["metadata"],
                    score=f.score,
                    retrievers={n: RetrieverHit(r, s) for n, (r, s) in f.ranks.items()},
                )
            )
        return results


def _pick(requested: float | None, default: float) -> float:
    return default if requested is None else requested


async def _timed(timings: dict[str, float], stage: str, work: Awaitable[T]) -> T:
    started = time.perf_counter()
    try:
        return await work
    finally:
        timings[stage] = (time.perf_counter() - started) * 1000
