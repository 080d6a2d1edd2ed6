"""The scale benchmark's core on 2,000 rows (random base vectors, so no model): the numpy ground
truth, recall per ef_search, the exact search it is checked against, sizes and the JSON."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import psycopg
from bench import scale
from pgvector.psycopg import register_vector_async

ROWS = 2_000
QUERIES = 20
EFS = (1, 40, 200)  # ef_search 1 finds 1 row: recall 0.1 at best


def test_exact_top_k_merges_blocks_best_first() -> None:
    degrees = np.array([0, 10, 50, 90, 135, 180, 270])
    corpus = np.stack([np.cos(np.radians(degrees)), np.sin(np.radians(degrees))], axis=1)
    corpus = corpus.astype(np.float32)
    queries = np.array([[1, 0], [np.cos(np.radians(250)), np.sin(np.radians(250))]])
    queries = queries.astype(np.float32)
    # Blocks of 2 rows: the second query's best (270 degrees) is alone in the last block.
    ids, scores = scale.exact_top_k(corpus, queries, k=3, block=2)
    assert ids.tolist() == [[0, 1, 2], [6, 5, 0]]
    expected = [
        np.cos(np.radians(degrees[[0, 1, 2]])),
        np.cos(np.radians(250 - degrees[[6, 5, 0]])),
    ]
    np.testing.assert_allclose(scores, expected, atol=1e-6)
    # A block smaller than k still fills the k places.
    ids, _ = scale.exact_top_k(corpus, queries[:1], k=4, block=3)
    assert ids.tolist() == [[0, 1, 2, 3]]


def test_hits_count_rows_at_the_kth_similarity_up_to_near_ties() -> None:
    corpus = np.eye(4, dtype=np.float32)
    corpus[3] = [0.5 - 1e-6, 0, 0, 0]  # a near-tie with the k-th best below
    query = np.array([0.9, 0.5, 0.2, 0], dtype=np.float32)
    _, scores = scale.exact_top_k(corpus, query[None, :], k=2)
    kth = float(scores[0, 1])
    assert scale.hits([0, 1], query, corpus, kth) == 2
    assert scale.hits([0, 2], query, corpus, kth) == 1
    assert scale.hits([1, 3], query, corpus, kth) == 1  # row 3 scores 0.45: no tie
    assert scale.hits([], query, corpus, kth) == 0


def test_bench_core_measures_recall_latency_and_sizes(dsn: str, tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    base = rng.standard_normal((50, scale.DIMENSIONS)).astype(np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)

    async def run() -> scale.ScaleReport:
        # With generic plans, and an HNSW scan that finds 1 row by default, an exact search
        # that reused a plan cached from an HNSW search would disagree with numpy.
        async with await psycopg.AsyncConnection.connect(
            dsn,
            autocommit=True,
            options="-c plan_cache_mode=force_generic_plan -c hnsw.ef_search=1",
        ) as conn:
            await register_vector_async(conn)
            return await scale.bench_rows(conn, base, ROWS, QUERIES, EFS, QUERIES, seed=3)

    report = asyncio.run(run())

    assert report.rows == ROWS and report.dimensions == scale.DIMENSIONS
    assert report.build_s > 0 and report.load_s > 0
    assert report.index_bytes > 0 and report.table_bytes > ROWS * scale.DIMENSIONS * 4
    assert report.build.graph_fits and report.build.maintenance_work_mem == "256MB"
    assert f"({scale.INDEX})" in report.plans["hnsw"]
    assert "Seq Scan" in report.plans["exact"]

    recall = {e.ef_search: e.recall_at_10 for e in report.ef}
    assert all(0 <= r <= 1 for r in recall.values())
    assert recall[1] < 0.11  # so these were HNSW scans, not a cached exact plan
    assert recall[200] >= recall[40] - 0.02
    assert recall[200] >= 0.95
    assert all(0 < e.p50_ms <= e.p95_ms for e in report.ef)
    assert report.exact.queries == QUERIES
    assert report.exact.agree_with_numpy == QUERIES
    assert 0 < report.exact.p50_ms <= report.exact.p95_ms

    out = tmp_path / "results" / "scale.json"
    scale.write_results(out, {"cpus": 2}, [report])
    result = json.loads(out.read_text())["results"][0]
    assert {
        "rows",
        "dimensions",
        "build_s",
        "index_bytes",
        "table_bytes",
        "maintenance_work_mem",
        "max_parallel_maintenance_workers",
        "parallel_workers_launched",
        "graph_fits",
        "ef",
        "exact",
    } <= result.keys()
    assert [e["ef_search"] for e in result["ef"]] == list(EFS)
    assert {"recall_at_10", "p50_ms", "p95_ms"} <= result["ef"][0].keys()
    assert {"p50_ms", "p95_ms", "agree_with_numpy"} <= result["exact"].keys()

    lines = scale.format_tables([report])
    assert any("exact" in line and f"{ROWS:,}" in line for line in lines)
