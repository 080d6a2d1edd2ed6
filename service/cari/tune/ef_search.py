"""`cari tune ef-search`: how much of the exact top k the HNSW index finds at each `ef_search`,
on this collection's vectors, and at what latency; the smallest value reaching a recall target.

Each question is searched by the statement searches run (search_vector.sql, with the same
filters), first with index scans off, so PostgreSQL reads every vector of the collection and
sorts them (the exact top k), then through the index at each ef_search. All of it runs in one
read-only REPEATABLE READ transaction: rows written meanwhile cannot pass for lost recall.
Questions are the user's, or, without them, made from chunks of the collection drawn by a hash
of their ids (`seed`): each chunk's rarest words as a key-phrase question (`fit.pseudo_questions`,
as the relevance fit makes its probes), embedded as searches embed questions. A chunk's own
vector would be a poor question: on TyDi QA (4,692 chunks) those found 0.991 of the exact top 10
at ef_search 20, where real questions found 0.940 (`python -m bench.tune --dataset ...`).

The recommendation is the smallest ef_search searched through the HNSW index that reaches the
target: PostgreSQL may plan a search of a small collection as a read of all its vectors (pgvector
estimates the index's cost from ef_search), exact at any ef_search, so such a value is no
evidence for the collection once it grows, and none is recommended from it.

Latency is each search's time as this process sees it (a round trip on the pool), measured
after one unrecorded pass at the largest ef_search has read the index into memory.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from cari import collection
from cari.db.queries import query
from cari.db.vector_space import space
from cari.embed import Embedders
from cari.errors import NotFound
from cari.limits import refuse_nul
from cari.schema.collections import CollectionUpdate
from cari.schema.tune import EfSearchPoint, EfSearchTuneRequest, EfSearchTuning
from cari.search.filters import compile_filters
from cari.search.fit import pseudo_questions
from cari.settings import Settings
from cari.tune.bootstrap import mean_interval

Ranked = list[tuple[int, float]]  # a search's chunks, best first, with their cosine similarity
# (questions searched so far, questions to search in all): the exact pass, then each ef_search
Progress = Callable[[int, int], None]


async def tune(
    pool: AsyncConnectionPool,
    name: str,
    request: EfSearchTuneRequest,
    embedders: Embedders,
    settings: Settings,
    progress: Progress | None = None,
) -> EfSearchTuning:
    refuse_nul("questions", request.questions)
    values = sorted(set(request.values))
    filters, filter_params = compile_filters(request.filters)
    async with pool.connection() as conn:
        cur = await conn.execute(query("tune_target"), {"name": name})
        target = await cur.fetchone()
        if target is None:
            raise NotFound(f"collection '{name}' does not exist")
        collection_id, embedder_name, own_ef_search = target
        embedder = embedders.get(embedder_name)
        vectors = space(embedder.dimension, settings)
        params = {**filter_params, "collection_id": collection_id}
        texts = request.questions
        if texts is None:
            sample = sql.SQL(query("tune_sample")).format(filters=filters)
            bound = {"dimension": embedder.dimension, "seed": request.seed}
            cur = await conn.execute(sample, {**params, **bound, "sample": request.sample})
            texts = pseudo_questions(
                [f"{title}\n{content}" for title, content in await cur.fetchall()],
                count=request.sample,
            )
        questions = [
            np.asarray(v, dtype=np.float32)
            for v in (await embedder.embed_queries(texts) if texts else [])
        ]
        statement = vectors.statement("search_vector", filters=filters, alias=sql.Identifier("c"))
        index = vectors.index_name("chunks")
        async with conn.transaction():
            await conn.execute(query("tune_snapshot"))
            total = len(questions) * (len(values) + 2)
            done = 0

            async def each(ef_search: int | None) -> tuple[list[Ranked], list[float]]:
                """Every question's top k, and its latency in ms; `None`: the exact scan."""
                nonlocal done
                if ef_search is not None:
                    await conn.execute(query("search_vector_settings"), {"ef_search": ef_search})
                found, latencies = [], []
                for vector in questions:
                    bound = {**params, "vector": vector, "candidates": request.k}
                    began = time.perf_counter()
                    cur = await conn.execute(statement, bound, prepare=False)  # see Space
                    rows = await cur.fetchall()
                    latencies.append((time.perf_counter() - began) * 1000)
                    found.append([(int(r[0]), float(r[1])) for r in rows])
                    done += 1
                    if progress is not None:
                        progress(done, total)
                return found, latencies

            await conn.execute(query("tune_index_scans"), {"scans": "off"})
            exact, exact_ms = await each(None)
            await conn.execute(query("tune_index_scans"), {"scans": "on"})
            # Nothing to find (no chunk, or none within the filters): no point to measure.
            measured = values if any(exact) else []
            if measured:
                await each(values[-1])  # reads the index into memory: not recorded
            points = []
            for ef_search in measured:
                found, latencies = await each(ef_search)
                used = await _uses_index(conn, statement, {**params, "vector": questions[0]}, index)
                points.append(_point(ef_search, exact, found, latencies, used))
    # Only a value searched through the index: where PostgreSQL read the collection exactly
    # instead (it is small), the recall says nothing of that ef_search once it grows.
    recommended = next(
        (p.ef_search for p in points if p.index_used and p.recall >= request.recall), None
    )
    applied = request.apply and recommended is not None
    if applied:
        async with pool.connection() as conn:
            await collection.update(conn, name, CollectionUpdate(ef_search=recommended))
    return EfSearchTuning(
        collection=name,
        questions=len(questions),
        questions_from="sample" if request.questions is None else "given",
        k=request.k,
        target=request.recall,
        filters=request.filters,
        exact_p50_ms=round(float(np.median(exact_ms)), 3) if exact_ms else 0.0,
        points=points,
        recommended=recommended,
        current=own_ef_search or settings.hnsw_ef_search,
        current_source="settings" if own_ef_search is None else "collection",
        applied=applied,
    )


async def _uses_index(
    conn: psycopg.AsyncConnection[Any], statement: sql.Composed, params: dict[str, Any], index: str
) -> bool:
    """Whether PostgreSQL plans the search through an HNSW index: on a small collection, or
    one with stale statistics, it may read the collection's rows and sort them instead, exactly,
    and ef_search then changes nothing."""
    explained = sql.SQL("EXPLAIN (FORMAT JSON) {}").format(statement)
    cur = await conn.execute(explained, {**params, "candidates": 10}, prepare=False)
    row = await cur.fetchone()
    assert row is not None
    nodes = [row[0][0]["Plan"]]
    while nodes:
        node = nodes.pop()
        if node.get("Index Name") == index:
            return True
        nodes.extend(node.get("Plans", []))
    return False


def _point(
    ef_search: int,
    exact: Sequence[Ranked],
    found: Sequence[Ranked],
    latencies: list[float],
    index_used: bool,
) -> EfSearchPoint:
    recalls = [_recall(a, e) for a, e in zip(found, exact, strict=True) if e]
    recall, low, high = mean_interval(recalls)
    p50, p95 = np.percentile(latencies, [50, 95])
    return EfSearchPoint(
        ef_search=ef_search,
        recall=round(recall, 4),
        recall_low=round(low, 4),
        recall_high=round(high, 4),
        p50_ms=round(float(p50), 3),
        p95_ms=round(float(p95), 3),
        index_used=index_used,
    )


def _recall(found: Ranked, exact: Ranked) -> float:
    """The share of the exact top k found. A chunk as similar as the exact k-th counts, whichever
    it is: chunks of the same text have the same vector, and the index may return another of
    them than the sort's tie order (the 1e-6 absorbs float rounding between the two plans)."""
    kth = exact[-1][1] - 1e-6
    return min(len(exact), sum(1 for _, score in found if score >= kth)) / len(exact)
