"""What Cari counts and measures, as Prometheus metrics, in one place; docs/operations.md says
what each series means and what to alert on.

prometheus_client (the Prometheus project's own library) holds them in its default registry,
which `GET /metrics` renders. HTTP requests are counted by Litestar's Prometheus middleware
(`cari_requests_total`, `cari_request_duration_seconds`: see `cari.api.app`); what only the
core knows is here: searches by resolved mode and stage, degraded searches, embedder failures,
ingestion. Pool and embedder state are read when scraped (`watch`), so the request path pays
nothing for them.

One process, one registry: `cari serve` runs a single process (no worker processes), so no
multiprocess mode is needed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol

from prometheus_client import REGISTRY, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

# Searches take milliseconds to seconds; stages down to tens of microseconds (fusion).
_STAGE_BUCKETS = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
_SEARCH_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)

SEARCH_SECONDS = Histogram(
    "cari_search_duration_seconds",
    "Searches by their resolved mode: the searcher's own time, without HTTP.",
    ["mode"],
    buckets=_SEARCH_BUCKETS,
)
STAGE_SECONDS = Histogram(
    "cari_search_stage_duration_seconds",
    "Time of each search stage (the slowest sub-query's, when they run side by side).",
    ["mode", "stage"],
    buckets=_STAGE_BUCKETS,
)
QUERY_VECTORS = Counter(
    "cari_query_vectors",
    "Query vectors searches asked for, by where they came from: cache (the LRU, "
    "CARI_QUERY_CACHE_SIZE) or embedder (computed, or shared with an identical one in flight).",
    ["source"],
)
DEGRADED = Counter(
    "cari_search_degraded_total",
    "Searches answered without one of their parts (the vector search, when the embedder fails).",
    ["part"],
)
EMBEDDER_FAILURES = Counter(
    "cari_embedder_failures_total",
    "Embeddings that failed, by use (query, document) and reason (unavailable, timeout, busy).",
    ["use", "reason"],
)
DOCUMENTS = Counter(
    "cari_ingest_documents_total",
    "Documents ingested, by outcome (created, updated, unchanged).",
    ["status"],
)
CHUNKS = Counter(
    "cari_ingest_chunks_total",
    "Chunks written by ingestion, by whether they were stored with their vector.",
    ["embedded"],
)
KEYWORD_INDEX_DAMAGE = Counter(
    "cari_keyword_index_damage_total",
    "Operations that met a damaged block of the keyword index (`cari bm25 check` names it): "
    "search (answered from the chunks' own words instead, exactly) or fold (left for later).",
    ["operation"],
)
READS = Counter(
    "cari_reads_total",
    "Searches, answers and API reads by the server that ran them: primary, replica1, ... "
    "(the replicas in the order of CARI_READ_DATABASE_URLS).",
    ["node"],
)


def observe_search(mode: str, timings_ms: Mapping[str, float], degraded: Sequence[str]) -> None:
    """Record one finished search: its stage timings (the searcher's, in ms; "total" is the
    whole search) and the parts it went without."""
    for stage, ms in timings_ms.items():
        if stage == "total":
            SEARCH_SECONDS.labels(mode).observe(ms / 1000)
        else:
            STAGE_SECONDS.labels(mode, stage).observe(ms / 1000)
    for part in degraded:
        DEGRADED.labels(part).inc()


class QueryEmbeddings(Protocol):
    """What is reported of a searcher's query embeddings (`cari.search.query_vectors`)."""

    @property
    def pending(self) -> int: ...

    @property
    def breaker_open(self) -> bool: ...


class ReplicaStates(Protocol):
    """What is reported of the read replicas (`cari.db.replicas`)."""

    def states(self) -> list[tuple[str, bool, float | None]]: ...


class KeywordEngines(Protocol):
    """What is reported of the keyword engine (`cari.db.keyword_engine`)."""

    def labels(self) -> tuple[str, str] | None: ...


class _Watched:
    """Collects, when scraped, the state of the pools and query embedders of open runtimes
    (one in a server; the sum when a process opens several)."""

    def __init__(self) -> None:
        self.pools: list[AsyncConnectionPool] = []
        self.vectors: list[QueryEmbeddings] = []
        self.replicas: list[ReplicaStates] = []
        self.engines: list[KeywordEngines] = []

    def collect(self) -> Iterable[Metric]:
        stats = [pool.get_stats() for pool in self.pools]

        def total(key: str) -> int:
            return sum(s.get(key, 0) for s in stats)  # counters appear once they are non-zero

        yield GaugeMetricFamily(
            "cari_pool_connections", "Connections the pool holds open.", total("pool_size")
        )
        yield GaugeMetricFamily(
            "cari_pool_connections_max", "Most connections the pool opens.", total("pool_max")
        )
        yield GaugeMetricFamily(
            "cari_pool_connections_in_use",
            "Connections lent out (open minus idle).",
            total("pool_size") - total("pool_available"),
        )
        yield GaugeMetricFamily(
            "cari_pool_requests_waiting",
            "Requests waiting for a connection right now.",
            total("requests_waiting"),
        )
        yield CounterMetricFamily(
            "cari_pool_requests_queued",
            "Requests for a connection that had to wait for one.",
            total("requests_queued"),
        )
        yield CounterMetricFamily(
            "cari_pool_requests_errors",
            "Requests for a connection that failed (timed out: database_busy).",
            total("requests_errors"),
        )
        yield CounterMetricFamily(
            "cari_pool_wait_seconds",
            "Time requests spent waiting for a connection.",
            total("requests_wait_ms") / 1000,
        )
        yield GaugeMetricFamily(
            "cari_embedder_queries_pending",
            "Query embeddings asked for and not answered yet (waiting or computing).",
            sum(v.pending for v in self.vectors),
        )
        yield GaugeMetricFamily(
            "cari_embedder_circuit_open",
            "1 while the query embedder is skipped after failures in a row (or being probed).",
            int(any(v.breaker_open for v in self.vectors)),
        )
        in_use = GaugeMetricFamily(
            "cari_replica_in_use",
            "1 while a read replica serves reads; 0 while it is out (unreachable, or lagging "
            "past CARI_MAX_REPLICA_LAG_S).",
            labels=["replica"],
        )
        lag = GaugeMetricFamily(
            "cari_replica_lag_seconds",
            "How long ago the primary first had WAL a read replica has not replayed yet "
            "(0: it has everything), as of its last check.",
            labels=["replica"],
        )
        for replicas in self.replicas:
            for name, used, lag_s in replicas.states():
                in_use.add_metric([name], int(used))
                if lag_s is not None:
                    lag.add_metric([name], lag_s)
        yield in_use
        yield lag
        engine = GaugeMetricFamily(
            "cari_keyword_engine",
            "1 for the engine serving keyword search: cari_bm25 (Cari's C extension, at its "
            "version) or sql (the SQL statement); none until the database was first asked.",
            labels=["engine", "version"],
        )
        known = {labels for e in self.engines if (labels := e.labels()) is not None}
        for name, version in sorted(known):
            engine.add_metric([name, version], 1)
        yield engine


_watched = _Watched()
REGISTRY.register(_watched)


@contextmanager
def watch(
    pool: AsyncConnectionPool,
    vectors: QueryEmbeddings,
    replicas: ReplicaStates,
    engine: KeywordEngines,
) -> Iterator[None]:
    """Report `pool`, `vectors`, `replicas` and the keyword `engine` on /metrics while the
    block runs (a runtime's life)."""
    _watched.pools.append(pool)
    _watched.vectors.append(vectors)
    _watched.replicas.append(replicas)
    _watched.engines.append(engine)
    try:
        yield
    finally:
        _watched.pools.remove(pool)
        _watched.vectors.remove(vectors)
        _watched.replicas.remove(replicas)
        _watched.engines.remove(engine)
