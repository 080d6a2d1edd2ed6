"""HNSW at scale: build time, size, and recall@10 and latency per ef_search, against exact search
in the same run.

    python -m bench.scale [--rows 100000 1000000] [--queries 200] [--ef 40 100 200]
                          [--exact-queries 50] [--seed 1] [--maintenance-work-mem MB]
                          [--workers N] [--out bench/results/scale.json]

For each row count, in a fresh database `cari_bench_scale_<rows>`:

- **load**: a plain table `scale_vectors (id int4, embedding vector(384))` with no index, filled
  by one binary COPY in one transaction (pgvector's psycopg adapter), the vectors generated in
  blocks of 50,000 as they are written;
- **build**: one `CREATE INDEX ... USING hnsw (embedding vector_cosine_ops) WITH (m = 16,
  ef_construction = 64)`, Cari's index (sql/vector_indexes_create.sql; m and ef_construction
  come from Cari's settings), timed until its transaction commits. `SET LOCAL
  maintenance_work_mem` is 4 KiB per row, at least 256 MB (`--maintenance-work-mem` overrides
  it), so the graph fits: pgvector keeps ~2.2 KB per 384-d element in memory; when it does not
  fit pgvector says so in a NOTICE, which is caught and reported, and the build goes on much
  more slowly on disk. `max_parallel_maintenance_workers` is the server's (what Cari's own build
  gets) unless `--workers` sets it; `client_min_messages = debug1` for the build so pgvector's
  "using N parallel workers" tells how many were launched. Then `VACUUM (ANALYZE)`. Sizes:
  `pg_relation_size` of the index and `pg_table_size` of the table.
- **recall@10** of the HNSW query at each `--ef` against the exact top 10 computed in numpy
  (brute force over the float32 matrix in blocks of 100,000 rows; vectors are unit length, so
  cosine is the dot product). A returned row counts as a hit when its similarity is at least
  the 10th best minus 1e-5 (float rounding, in PostgreSQL or numpy, may swap near-ties).
- **latency**: one query at a time on one autocommit connection, each in its own transaction:
  `SELECT set_config('hnsw.ef_search', ef, true)`, then the timed statement `SELECT id FROM
  scale_vectors ORDER BY embedding <=> $1 LIMIT 10` (one round trip, results fetched).
  `enable_seqscan` is off too (on a small table the planner would rather sort it all). The
  baseline is the same statement after `set_config('enable_indexscan', 'off', true)`:
  PostgreSQL's exact search (a sequential scan, parallel if the planner likes), run on the
  first `--exact-queries` queries only, as it grows with the rows; the ratio is HNSW/exact.
  Neither is a prepared statement (a cached generic plan ignores the settings, so the exact
  search would run the index scan): both are planned at every run, planning in both timings.
  Both plans are checked first (HNSW must use the index, exact must not). Per query the
  variants (each ef, then exact) run in an order rotated query by query, after one warm-up pass
  (every query at each ef, exact on the first two).
- **check of the harness**: PostgreSQL's exact top 10 must equal numpy's on every query it ran:
  reported as the queries where it does up to near-ties (the hit rule above) and those where
  the ids are the very same.

Corpus (deterministic from `--seed`). Uniform random 384-d vectors are an unrealistic worst case
for HNSW: all pairs sit at cosine ~0 with almost no spread, so a query has no near neighbours
for the graph to follow and "the top 10" is nearly arbitrary. Real embeddings cluster; so, as in
`bench.search`: 400 real e5-small passage embeddings (`bench.search.base_vectors`, cached in
`bench/.cache/`), and each row is a random one of them + Gaussian noise, sigma 0.04 per
dimension, re-normalised (cosine ~0.79 to its base, ~0.62 to a row of the same base, ~0.46 to a
row of another). Queries are drawn the same way from another random stream, so they are not in
the table. Blocks are drawn in order from one stream, so the 100k corpus is the first 100k rows
of the 1M one, and the queries are the same at every size. This is still hard on HNSW, harder
as rows grow: within one base the noise is isotropic, so a query's true top 10 are picked out
of its base's rows (2,500 at 1M), which all sit within a few hundredths of cosine of each other
(the run prints the true 1st and 10th neighbours' mean cosine): uniform data's problem on a
smaller scale. Real embeddings have far fewer effective dimensions. The graph itself is not
deterministic (random levels, parallel insertion order): recall moves by ~0.01 between builds.

Memory: the float32 matrix stays in Python for the ground truth (1.5 GB at 1M); generation and
scoring work in blocks on top of it. The server needs maintenance_work_mem (3.9 GB at 1M, in
shared memory when the build is parallel) and the table and index on disk (~1.6 + ~2 GB at 1M).

Output: a line per stage as it runs, then a build table and a search table; the results go to
`--out` as JSON (rewritten after each row count): per row count rows, dimensions, build_s,
index_bytes, table_bytes, maintenance_work_mem, the parallel workers (set and launched), and per
ef_search recall_at_10, p50_ms and p95_ms, with the exact search's p50/p95 and agreement.

Runs on DATABASE_URL if set (the databases stay there), else on a throwaway embedded server.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import json
import math
import os
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import psycopg
from psycopg import sql

from bench import harness
from bench.harness import fresh_runtime
from bench.search import SIGMA, base_vectors, load_passages
from cari.settings import load_settings

AConn = psycopg.AsyncConnection[Any]

DIMENSIONS = 384
TOP_K = 10
TABLE = "scale_vectors"
INDEX = "scale_vectors_embedding_idx"
GENERATE_BLOCK = 50_000
TRUTH_BLOCK = 100_000
TIE = 1e-5
BYTES_PER_ROW = 4096
MIN_MEMORY_MB = 256
WARM_UP_EXACT = 2
OUT = Path(__file__).resolve().parent / "results" / "scale.json"
SEARCH = sql.SQL("SELECT id FROM {} ORDER BY embedding <=> %s LIMIT {}").format(
    sql.Identifier(TABLE), sql.Literal(TOP_K)
)
_WORKERS_LAUNCHED = re.compile(r"using (\d+) parallel workers")
LocalSettings = tuple[tuple[str, str], ...]  # (name, value) pairs, for SET LOCAL


@dataclass(frozen=True, slots=True)
class Build:
    m: int
    ef_construction: int
    maintenance_work_mem: str
    max_parallel_maintenance_workers: int
    parallel_workers_launched: int
    graph_fits: bool
    build_messages: list[str]


@dataclass(frozen=True, slots=True)
class EfResult:
    ef_search: int
    recall_at_10: float
    p50_ms: float
    p95_ms: float
    p50_ratio_to_exact: float
    p95_ratio_to_exact: float


@dataclass(frozen=True, slots=True)
class ExactResult:
    queries: int
    p50_ms: float
    p95_ms: float
    agree_with_numpy: int
    identical_to_numpy: int


@dataclass(frozen=True, slots=True)
class ScaleReport:
    rows: int
    dimensions: int
    queries: int
    seed: int
    load_s: float
    build_s: float
    vacuum_s: float
    index_bytes: int
    table_bytes: int
    build: Build
    ef: list[EfResult]
    exact: ExactResult
    plans: dict[str, str]
    top1_cosine: float
    top10_cosine: float


# Corpus ---------------------------------------------------------------------------------------


def vector_blocks(
    base: np.ndarray, count: int, rng: np.random.Generator, block: int = GENERATE_BLOCK
) -> Iterator[np.ndarray]:
    """`count` unit vectors, `block` at a time: a random base vector + N(0, SIGMA^2) noise per
    dimension, re-normalised (bench.search.synthetic_vectors' recipe, drawn in blocks)."""
    for start in range(0, count, block):
        n = min(block, count - start)
        owner = rng.integers(0, len(base), size=n)
        vectors = base[owner] + rng.standard_normal((n, base.shape[1]), dtype=np.float32) * SIGMA
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        yield vectors.astype(np.float32, copy=False)


def query_vectors(base: np.ndarray, count: int, seed: int) -> np.ndarray:
    """Queries from the corpus' distribution, on a stream of their own."""
    return np.concatenate(list(vector_blocks(base, count, np.random.default_rng([seed, 1]))))


# Ground truth ---------------------------------------------------------------------------------


def exact_top_k(
    corpus: np.ndarray, queries: np.ndarray, k: int, block: int = TRUTH_BLOCK
) -> tuple[np.ndarray, np.ndarray]:
    """Row numbers and similarities of each query's k most similar rows, best first, by brute
    force over `block` rows at a time. Rows and queries are unit vectors: cosine = dot product."""
    ids = np.empty((len(queries), 0), dtype=np.int64)
    scores = np.empty((len(queries), 0), dtype=np.float32)
    for start in range(0, len(corpus), block):
        block_scores = queries @ corpus[start : start + block].T
        kk = min(k, block_scores.shape[1])
        top = np.argpartition(-block_scores, kk - 1, axis=1)[:, :kk]
        ids = np.concatenate([ids, top + start], axis=1)
        scores = np.concatenate([scores, np.take_along_axis(block_scores, top, axis=1)], axis=1)
        keep = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        ids = np.take_along_axis(ids, keep, axis=1)
        scores = np.take_along_axis(scores, keep, axis=1)
    return ids, scores


def hits(found: Sequence[int], query: np.ndarray, corpus: np.ndarray, kth: float) -> int:
    """How many of `found` (distinct rows) belong in the exact top k whose k-th best similarity
    is `kth`: within TIE of it counts, so a near-tie swapped by float rounding is no miss."""
    if not found:
        return 0
    return int(np.count_nonzero(corpus[np.asarray(found)] @ query >= kth - TIE))


# Database -------------------------------------------------------------------------------------


async def load(conn: AConn, base: np.ndarray, rows: int, seed: int) -> tuple[np.ndarray, float]:
    """Create the table and fill it by one binary COPY; the vectors (row id = row number) and
    the seconds it took."""
    await conn.execute(
        sql.SQL("CREATE TABLE {} (id int4 NOT NULL, embedding vector({}) NOT NULL)").format(
            sql.Identifier(TABLE), sql.Literal(DIMENSIONS)
        )
    )
    corpus = np.empty((rows, DIMENSIONS), dtype=np.float32)
    copy_statement = sql.SQL("COPY {} (id, embedding) FROM STDIN (FORMAT BINARY)").format(
        sql.Identifier(TABLE)
    )
    started = time.perf_counter()
    async with conn.transaction(), conn.cursor().copy(copy_statement) as copy:
        copy.set_types(["int4", "vector"])
        start = 0
        for block in vector_blocks(base, rows, np.random.default_rng([seed, 0])):
            corpus[start : start + len(block)] = block
            for i, vector in enumerate(block, start):
                await copy.write_row((i, vector))
            start += len(block)
    return corpus, time.perf_counter() - started


def build_memory_mb(rows: int) -> int:
    return max(MIN_MEMORY_MB, math.ceil(rows * BYTES_PER_ROW / 2**20))


async def build_index(
    conn: AConn, m: int, ef_construction: int, memory_mb: int, workers: int | None
) -> tuple[Build, float]:
    """One timed CREATE INDEX, with what the server said while building."""
    messages: list[str] = []

    def collect(diagnostic: psycopg.errors.Diagnostic) -> None:
        messages.append(f"{diagnostic.severity_nonlocalized}: {diagnostic.message_primary}")

    conn.add_notice_handler(collect)
    try:
        async with conn.transaction():
            await conn.execute(
                "SELECT set_config('statement_timeout', '0', true), "
                "set_config('maintenance_work_mem', %s, true), "
                "set_config('client_min_messages', 'debug1', true)",
                (f"{memory_mb}MB",),
            )
            if workers is not None:
                await conn.execute(
                    "SELECT set_config('max_parallel_maintenance_workers', %s, true)",
                    (str(workers),),
                )
            cur = await conn.execute(
                "SELECT current_setting('maintenance_work_mem'), "
                "current_setting('max_parallel_maintenance_workers')::int"
            )
            memory, max_workers = await cur.fetchone() or ("", 0)
            started = time.perf_counter()
            await conn.execute(
                sql.SQL(
                    "CREATE INDEX {} ON {} USING hnsw (embedding vector_cosine_ops) "
                    "WITH (m = {}, ef_construction = {})"
                ).format(
                    sql.Identifier(INDEX),
                    sql.Identifier(TABLE),
                    sql.Literal(m),
                    sql.Literal(ef_construction),
                )
            )
        seconds = time.perf_counter() - started
    finally:
        conn.remove_notice_handler(collect)
    launched = [int(found[1]) for msg in messages if (found := _WORKERS_LAUNCHED.search(msg))]
    build = Build(
        m,
        ef_construction,
        str(memory),
        int(max_workers),
        max(launched, default=0),
        not any("no longer fits" in msg for msg in messages),
        messages,
    )
    return build, seconds


async def search(
    conn: AConn, vector: np.ndarray, settings: LocalSettings
) -> tuple[float, list[int]]:
    """Milliseconds of the search statement alone, and its ids, with `settings` local to its
    transaction."""
    async with conn.transaction():
        await set_local(conn, settings)
        started = time.perf_counter()
        # Never prepared: a prepared statement's cached generic plan ignores the SET LOCALs, so
        # an exact search would run the index scan of an earlier HNSW search, or the reverse.
        cur = await conn.execute(SEARCH, (vector,), prepare=False)
        ids = [int(row[0]) for row in await cur.fetchall()]
        ms = (time.perf_counter() - started) * 1000
    return ms, ids


async def set_local(conn: AConn, settings: LocalSettings) -> None:
    await conn.execute(
        "SELECT " + ", ".join(["set_config(%s, %s, true)"] * len(settings)),
        [value for pair in settings for value in pair],
    )


def _plan_chain(plan: dict[str, Any]) -> str:
    node = ("Parallel " if plan.get("Parallel Aware") else "") + plan["Node Type"]
    node += f" ({plan['Index Name']})" if "Index Name" in plan else ""
    children = plan.get("Plans", [])
    return node if not children else f"{node} > {_plan_chain(children[0])}"


async def plan(conn: AConn, vector: np.ndarray, settings: LocalSettings) -> str:
    async with conn.transaction():
        await set_local(conn, settings)
        cur = await conn.execute(sql.SQL("EXPLAIN (FORMAT JSON) ") + SEARCH, (vector,))
        row = await cur.fetchone()
    assert row is not None
    return _plan_chain(row[0][0]["Plan"])


def hnsw_settings(ef: int) -> LocalSettings:
    # No sequential scan: on a small table the planner would rather sort the whole table.
    return (("hnsw.ef_search", str(ef)), ("enable_seqscan", "off"))


EXACT_SETTINGS: LocalSettings = (("enable_indexscan", "off"),)


async def measure(
    conn: AConn, queries: np.ndarray, efs: Sequence[int], exact_queries: int
) -> tuple[dict[int, list[float]], dict[int, list[list[int]]], list[float], list[list[int]]]:
    """Latencies and ids per ef_search over every query, and of the exact search over the first
    `exact_queries`, one at a time after one warm-up pass."""
    for i, vector in enumerate(queries):
        for ef in efs:
            await search(conn, vector, hnsw_settings(ef))
        if i < min(WARM_UP_EXACT, exact_queries):
            await search(conn, vector, EXACT_SETTINGS)
    latency: dict[int, list[float]] = {ef: [] for ef in efs}
    found: dict[int, list[list[int]]] = {ef: [] for ef in efs}
    exact_latency: list[float] = []
    exact_found: list[list[int]] = []
    for i, vector in enumerate(queries):
        variants: list[int | None] = [*efs, None] if i < exact_queries else list(efs)
        shift = i % len(variants)
        for variant in variants[shift:] + variants[:shift]:
            if variant is None:
                ms, ids = await search(conn, vector, EXACT_SETTINGS)
                exact_latency.append(ms)
                exact_found.append(ids)
            else:
                ms, ids = await search(conn, vector, hnsw_settings(variant))
                latency[variant].append(ms)
                found[variant].append(ids)
    return latency, found, exact_latency, exact_found


async def bench_rows(
    conn: AConn,
    base: np.ndarray,
    rows: int,
    query_count: int,
    efs: Sequence[int],
    exact_queries: int,
    seed: int,
    *,
    m: int = 16,
    ef_construction: int = 64,
    memory_mb: int | None = None,
    workers: int | None = None,
) -> ScaleReport:
    """Load `rows` vectors into the database of `conn` (autocommit, pgvector registered), build
    the index and measure recall and latency of `query_count` queries."""
    corpus, load_s = await load(conn, base, rows, seed)
    print(f"{rows:,} rows: binary COPY in {load_s:.1f} s ({rows / load_s:,.0f} rows/s)", flush=True)
    memory = memory_mb or build_memory_mb(rows)
    build, build_s = await build_index(conn, m, ef_construction, memory, workers)
    print(
        f"{rows:,} rows: HNSW build in {build_s:.1f} s (maintenance_work_mem "
        f"{build.maintenance_work_mem}, max_parallel_maintenance_workers "
        f"{build.max_parallel_maintenance_workers}, {build.parallel_workers_launched} launched"
        f"{'' if build.graph_fits else '; GRAPH DID NOT FIT'})",
        flush=True,
    )
    started = time.perf_counter()
    await conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(sql.Identifier(TABLE)))
    vacuum_s = time.perf_counter() - started
    cur = await conn.execute(
        "SELECT pg_relation_size(%s::regclass), pg_table_size(%s::regclass)", (INDEX, TABLE)
    )
    index_bytes, table_bytes = await cur.fetchone() or (0, 0)

    queries = query_vectors(base, query_count, seed)
    started = time.perf_counter()
    truth, truth_scores = exact_top_k(corpus, queries, TOP_K)
    print(
        f"{rows:,} rows: numpy ground truth for {query_count} queries in "
        f"{time.perf_counter() - started:.1f} s",
        flush=True,
    )
    plans = await checked_plans(conn, queries[0], max(efs))
    exact_queries = min(exact_queries, query_count)
    latency, found, exact_latency, exact_found = await measure(conn, queries, efs, exact_queries)
    kth = truth_scores[:, TOP_K - 1]
    exact_p50, exact_p95 = np.percentile(exact_latency, [50, 95])
    ef_results = [
        ef_result(ef, found[ef], latency[ef], queries, corpus, kth, exact_p50, exact_p95)
        for ef in efs
    ]
    identical = sum(set(ids) == set(t.tolist()) for ids, t in zip(exact_found, truth, strict=False))
    agree = sum(
        hits(ids, q, corpus, t) == TOP_K
        for ids, q, t in zip(exact_found, queries, kth, strict=False)
    )
    return ScaleReport(
        rows,
        DIMENSIONS,
        query_count,
        seed,
        load_s,
        build_s,
        vacuum_s,
        int(index_bytes),
        int(table_bytes),
        build,
        ef_results,
        ExactResult(exact_queries, float(exact_p50), float(exact_p95), agree, identical),
        plans,
        float(truth_scores[:, 0].mean()),
        float(kth.mean()),
    )


async def checked_plans(conn: AConn, vector: np.ndarray, ef: int) -> dict[str, str]:
    """The plans of the HNSW and the exact search; an error unless the first reads the index
    and the second does not."""
    plans = {
        "hnsw": await plan(conn, vector, hnsw_settings(ef)),
        "exact": await plan(conn, vector, EXACT_SETTINGS),
    }
    if f"({INDEX})" not in plans["hnsw"] or f"({INDEX})" in plans["exact"]:
        raise RuntimeError(f"unexpected plans: {plans}")
    return plans


def ef_result(
    ef: int,
    found: Sequence[Sequence[int]],
    latency: Sequence[float],
    queries: np.ndarray,
    corpus: np.ndarray,
    kth: np.ndarray,
    exact_p50: float,
    exact_p95: float,
) -> EfResult:
    """Recall@10 and latency at one `ef_search`, the latency against the exact search's."""
    recall = np.mean(
        [hits(ids, q, corpus, t) / TOP_K for ids, q, t in zip(found, queries, kth, strict=True)]
    )
    p50, p95 = np.percentile(latency, [50, 95])
    return EfResult(ef, float(recall), float(p50), float(p95), p50 / exact_p50, p95 / exact_p95)


# Report ---------------------------------------------------------------------------------------


def _mb(n: int) -> str:
    return f"{n / 2**20:,.0f} MB"


def format_tables(reports: Sequence[ScaleReport]) -> list[str]:
    out = ["build (HNSW vector_cosine_ops; load = one binary COPY, no index):"]
    out.append(
        f"  {'rows':>9} {'m':>3} {'ef_c':>4} {'load s':>7} {'build s':>8} {'vacuum s':>8} "
        f"{'index':>9} {'table':>9}  {'maint_work_mem':>14} {'workers':>7} {'launched':>8} "
        f"{'graph fit':>9}"
    )
    for r in reports:
        b = r.build
        out.append(
            f"  {r.rows:>9,} {b.m:>3} {b.ef_construction:>4} {r.load_s:7.1f} {r.build_s:8.1f} "
            f"{r.vacuum_s:8.1f} {_mb(r.index_bytes):>9} {_mb(r.table_bytes):>9}  "
            f"{b.maintenance_work_mem:>14} {b.max_parallel_maintenance_workers:>7} "
            f"{b.parallel_workers_launched:>8} {'yes' if b.graph_fits else 'NO':>9}"
        )
    out.append("")
    out.append(
        f"search (top {TOP_K}, one query at a time after a warm-up pass; recall against numpy's "
        "exact top 10; the baseline is the exact search in PostgreSQL):"
    )
    out.append(
        f"  {'rows':>9} {'ef_search':>9} {'queries':>7} {'recall@10':>9} {'p50 ms':>8} "
        f"{'p95 ms':>8} {'p50/exact':>9} {'p95/exact':>9}"
    )
    for r in reports:
        for e in r.ef:
            out.append(
                f"  {r.rows:>9,} {e.ef_search:>9} {r.queries:>7} {e.recall_at_10:9.4f} "
                f"{e.p50_ms:8.2f} {e.p95_ms:8.2f} {e.p50_ratio_to_exact:9.4f} "
                f"{e.p95_ratio_to_exact:9.4f}"
            )
        x = r.exact
        out.append(
            f"  {r.rows:>9,} {'exact':>9} {x.queries:>7} {'':>9} {x.p50_ms:8.2f} {x.p95_ms:8.2f} "
            f"{1:9.4f} {1:9.4f}"
        )
    out.append("")
    for r in reports:
        x = r.exact
        out.append(
            f"{r.rows:,} rows: exact PostgreSQL top {TOP_K} = numpy's on {x.agree_with_numpy} of "
            f"{x.queries} queries ({x.identical_to_numpy} with the very same ids); true "
            f"neighbours' mean cosine: 1st {r.top1_cosine:.3f}, {TOP_K}th {r.top10_cosine:.3f}"
        )
        out.append(f"  plans: HNSW {r.plans['hnsw']}; exact {r.plans['exact']}")
        for message in r.build.build_messages:
            if not message.startswith("DEBUG"):
                out.append(f"  build said {message}")
    return out


async def server_info(conn: AConn) -> dict[str, Any]:
    cur = await conn.execute(
        "SELECT version(), (SELECT extversion FROM pg_extension WHERE extname = 'vector'), "
        "current_setting('shared_buffers'), current_setting('max_parallel_workers_per_gather'), "
        "current_setting('jit')"
    )
    version, pgvector, shared_buffers, per_gather, jit = await cur.fetchone() or ("",) * 5
    return {
        "postgresql": version,
        "pgvector": pgvector,
        "shared_buffers": shared_buffers,
        "max_parallel_workers_per_gather": int(per_gather),
        "jit": jit,
        "cpus": os.cpu_count(),
        "memory_bytes": psutil.virtual_memory().total,
    }


def result_json(report: ScaleReport) -> dict[str, Any]:
    """One row count's results, the build's settings flattened in."""
    result = dataclasses.asdict(report)
    result.update(result.pop("build"))
    return result


def write_results(path: Path, server: dict[str, Any], reports: Sequence[ScaleReport]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "benchmark": "bench.scale",
        "date": datetime.date.today().isoformat(),
        "server": server,
        "top_k": TOP_K,
        "results": [result_json(r) for r in reports],
    }
    path.write_text(json.dumps(document, indent=2) + "\n")


async def run(
    row_counts: list[int],
    query_count: int,
    efs: list[int],
    exact_queries: int,
    seed: int,
    memory_mb: int | None,
    workers: int | None,
    out: Path,
) -> None:
    began = time.perf_counter()
    settings = load_settings(reembed_interval_s=0, statement_timeout_ms=0, embedder="local")
    base: np.ndarray | None = None
    reports: list[ScaleReport] = []
    server: dict[str, Any] = {}
    for rows in row_counts:
        async with fresh_runtime(f"cari_bench_scale_{rows}", settings) as rt:
            if base is None:
                base = await base_vectors(rt.embedder, load_passages())
            # The next row count goes to a fresh database on the same server.
            settings = settings.model_copy(update={"database_url": rt.pool.conninfo})
            async with rt.pool.connection() as conn:
                server = await server_info(conn)
                report = await bench_rows(
                    conn,
                    base,
                    rows,
                    query_count,
                    efs,
                    exact_queries,
                    seed,
                    m=settings.hnsw_m,
                    ef_construction=settings.hnsw_ef_construction,
                    memory_mb=memory_mb,
                    workers=workers,
                )
        reports.append(report)
        write_results(out, server, reports)
        print("\n".join(format_tables([report])), flush=True)
        print(flush=True)
    print(
        f"PostgreSQL: {server['postgresql']}; pgvector {server['pgvector']}; shared_buffers "
        f"{server['shared_buffers']}, max_parallel_workers_per_gather "
        f"{server['max_parallel_workers_per_gather']}; {server['cpus']} CPUs, "
        f"{server['memory_bytes'] / 2**30:.0f} GiB"
    )
    print(f"corpus: {DIMENSIONS}-d, 400 real e5-small vectors + N(0, {SIGMA}^2), seed {seed}")
    print()
    print("\n".join(format_tables(reports)))
    print()
    print(f"results: {out}")
    print(f"total runtime {time.perf_counter() - began:.0f} s")


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--ef", type=int, nargs="+", default=[40, 100, 200])
    parser.add_argument("--exact-queries", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--maintenance-work-mem",
        type=int,
        metavar="MB",
        help=f"default: {BYTES_PER_ROW} bytes per row, at least {MIN_MEMORY_MB} MB",
    )
    parser.add_argument(
        "--workers", type=int, help="max_parallel_maintenance_workers (default: the server's)"
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    asyncio.run(
        run(
            args.rows,
            args.queries,
            args.ef,
            args.exact_queries,
            args.seed,
            args.maintenance_work_mem,
            args.workers,
            args.out,
        )
    )


if __name__ == "__main__":
    main()
