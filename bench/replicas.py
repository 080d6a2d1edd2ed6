"""Search throughput with reads on streaming replicas: the primary alone, then one and two
standbys, all on this machine, with each node's CPU.

    OMP_NUM_THREADS=1 python -m bench.replicas [--chunks 10000] [--concurrency 8]
                         [--duration 15] [--modes keyword vector] [--queries 200] [--rounds 2]
                         [--out bench/results/replicas.json]

- **cluster**: an embedded PostgreSQL in a temporary folder (shared_buffers 256 MB) holding
  `bench.search`'s corpus (`--chunks` rows: real passages, synthetic vectors around 400 real e5
  embeddings; its docstring says how), then two standbys copied from it with `pg_basebackup`
  (`cari.standby`, as `cari db replica` does), streaming its WAL, on Unix sockets of their own;
  each node's tables and indexes are then read into its shared buffers (`pg_prewarm`), so
  the standbys do not start cold against a primary warm from the load.
- **servers**: for each setup (`primary`: no replica; `1 standby`; `2 standbys`) one
  `cari serve` (`bench.load.served`: one uvicorn process, the local embedder, a pool of 10 per
  server) with `CARI_READ_DATABASE_URLS` naming none, one or both standbys, and
  `CARI_QUERY_CACHE_SIZE` 4x the questions. Before its cells each question is searched once in
  vector mode, so every measured vector search finds its query vector in the cache: the local
  model does not run during the cells and the figures are the database's and the service's.
- **cells**: per setup and mode (keyword, vector), `--concurrency` clients (`bench.load.drive`:
  one keep-alive connection each, requests back to back for `--duration` s), `POST
  /v1/collections/bench/search` with the questions in turn, top_k 10, explain on.
- **per-node CPU**: user + system CPU seconds of each postmaster's process tree (its backends,
  walsender and walreceiver, startup process included), of the `cari serve` process and of this
  load generator, read with psutil before and after each cell, over the cell's wall time: the
  cores each used. Which node served the searches is the server's own count
  (`cari_reads_total{node}` on /metrics, gained during the cell).

Rounds: every setup `--rounds` times, every other round in reverse order (primary, 1, 2, then
2, 1, primary), so a change of the machine's load during the run favours no setup; the table
gives each round's throughput and the means. Baseline: the `primary` setup's mean throughput in
the same run (`vs primary`). All of it shares the
machine's cores (2 on the reference machine): the service (one Python process), the load
generator and every PostgreSQL node, so a standby can only add throughput when PostgreSQL,
not the service, is what saturates the cores. The run prints the cores and the load average
before and after. OMP_NUM_THREADS is printed: set it to 1 (the cells embed nothing; the warm-up
and the base vectors do).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from statistics import mean
from typing import Any

import httpx
import psutil
import psycopg

from bench import harness
from bench.harness import RESULTS, shown
from bench.load import (
    JSON_HEADERS,
    REQUEST_TIMEOUT_S,
    SEARCH,
    drive,
    gained,
    save,
    scrape,
    search_target,
    served,
)
from bench.search import build_corpus, load_queries
from cari.db import embedded, migrations, standby
from cari.runtime import open_runtime
from cari.settings import load_settings

OUT = RESULTS / "replicas.json"
SHARED_BUFFERS_MB = 256
SETUPS = {"primary": 0, "1 standby": 1, "2 standbys": 2}
CATCH_UP_TIMEOUT_S = 120


def postmaster(pgdata: Path) -> int:
    info = embedded._library().utils.PostmasterInfo.read_from_pgdata(pgdata)
    assert info is not None and info.is_running(), f"no server runs in {pgdata}"
    return int(info.pid)


def cpu_seconds(pid: int, *, tree: bool) -> dict[int, float]:
    """User + system CPU seconds of `pid` (and of its descendants with `tree`), per process."""
    root = psutil.Process(pid)
    processes = [root, *root.children(recursive=True)] if tree else [root]
    seconds = {}
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            times = process.cpu_times()
            seconds[process.pid] = times.user + times.system
    return seconds


def used(before: Mapping[int, float], after: Mapping[int, float]) -> float:
    """CPU seconds spent between two readings (a process that started meanwhile: all of its;
    one that ended meanwhile is not counted, so backends must outlive the cell: pooled ones do)."""
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


async def caught_up(primary: str, standbys: Sequence[str]) -> None:
    """Wait until every standby has replayed all the primary has flushed."""
    with psycopg.connect(primary, autocommit=True) as conn:
        row = conn.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()
    assert row is not None
    deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
    for dsn in standbys:
        while True:
            with psycopg.connect(dsn, autocommit=True) as conn:
                done = conn.execute(
                    "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (row[0],)
                ).fetchone()
            if done and done[0]:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"a standby did not catch up in {CATCH_UP_TIMEOUT_S} s")
            await asyncio.sleep(0.2)


def prewarm(dsn: str) -> None:
    """Every table and index of Cari's schema into the node's shared buffers: the standbys
    start cold, the primary warm from the load; the same start for all."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "SELECT sum(pg_prewarm(c.oid)) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'i')"
        )


async def cell(
    url: str,
    queries: Sequence[str],
    mode: str,
    args: argparse.Namespace,
    nodes: Mapping[str, int],
    server_pid: int,
) -> dict[str, Any]:
    """One setup's cell for `mode`: throughput, latency, reads per node and CPU per node."""
    trees = {name: cpu_seconds(pid, tree=True) for name, pid in nodes.items()}
    service = cpu_seconds(server_pid, tree=False)
    client = cpu_seconds(os.getpid(), tree=False)
    metrics = await scrape(url)
    started = time.perf_counter()
    measured = await drive(
        url, search_target(queries, mode), args.concurrency, args.duration, args.max_requests
    )
    wall = time.perf_counter() - started
    reads = gained(metrics, await scrape(url))
    cores = {
        name: used(trees[name], cpu_seconds(pid, tree=True)) / wall for name, pid in nodes.items()
    }
    cores["cari serve"] = used(service, cpu_seconds(server_pid, tree=False)) / wall
    cores["load generator"] = used(client, cpu_seconds(os.getpid(), tree=False)) / wall
    served_by = {
        key.split('"')[1]: count
        for key, count in reads.items()
        if key.startswith("cari_reads_total{") and count
    }
    return {
        **measured,
        "wall_s": round(wall, 2),
        "served_by": served_by,
        "cores": {name: round(value, 3) for name, value in cores.items()},
    }


async def warm(url: str, queries: Sequence[str]) -> None:
    """Each question searched once in vector mode: every query vector is then cached."""
    async with httpx.AsyncClient(base_url=url, timeout=REQUEST_TIMEOUT_S) as http:
        for body in search_target(queries, "vector").bodies:
            response = await http.post(SEARCH, content=body, headers=JSON_HEADERS)
            response.raise_for_status()


def summarize(rounds: Sequence[Mapping[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """Per setup and mode over the rounds: each round's throughput, their mean and its ratio to
    the primary's mean, the mean p50 and p95, the errors, and each node's mean cores and reads."""
    summary: dict[str, Any] = {}
    for setup in rounds[0]:
        summary[setup] = {}
        for mode in rounds[0][setup]:
            cells = [found[setup][mode] for found in rounds]
            rps = [cell["throughput_rps"] for cell in cells]
            summary[setup][mode] = {
                "throughput_rps": rps,
                "mean_rps": round(mean(rps), 2),
                "p50_ms": round(mean(cell["p50_ms"] for cell in cells), 2),
                "p95_ms": round(mean(cell["p95_ms"] for cell in cells), 2),
                "errors": sum(cell["errors"] for cell in cells),
                "cores": {
                    name: round(mean(cell["cores"][name] for cell in cells), 3)
                    for name in cells[0]["cores"]
                },
                "served_by": {
                    name: sum(cell["served_by"].get(name, 0) for cell in cells)
                    for name in cells[0]["cores"]
                    if any(name in cell["served_by"] for cell in cells)
                },
            }
    for modes in summary.values():
        for mode, found in modes.items():
            baseline = summary["primary"][mode]["mean_rps"]
            found["vs_primary"] = round(found["mean_rps"] / baseline, 3) if baseline else None
    return summary


def format_table(summary: Mapping[str, Mapping[str, Any]], names: Sequence[str]) -> list[str]:
    columns = [*names, "cari serve", "load generator"]
    header = f"{'setup':<11} {'mode':<8} {'req/s by round':>16} {'mean':>6} {'vs primary':>10} "
    header += f"{'p50 ms':>7} {'p95 ms':>7} {'errors':>6}  " + " ".join(f"{c:>14}" for c in columns)
    lines = [header, f"{'':<77}mean CPU in cores (CPU s / wall s), and searches served"]
    for setup, modes in summary.items():
        for mode, found in modes.items():
            rounds = " / ".join(f"{rps:.1f}" for rps in found["throughput_rps"])
            cores = " ".join(
                f"{found['cores'][c]:>7.2f} {found['served_by'].get(c, 0):>6,.0f}"
                if c in names
                else f"{found['cores'][c]:>14.2f}"
                for c in columns
            )
            lines.append(
                f"{setup:<11} {mode:<8} {rounds:>16} {found['mean_rps']:>6.1f} "
                f"{found['vs_primary']:>10.2f} {found['p50_ms']:>7.2f} {found['p95_ms']:>7.2f} "
                f"{found['errors']:>6}  {cores}"
            )
    return lines


async def run(args: argparse.Namespace) -> None:
    began = time.perf_counter()
    threads = harness.omp_note("OpenMP's default (unset)")
    print(f"OMP_NUM_THREADS={threads}; {os.cpu_count()} cores", flush=True)
    folder = Path(tempfile.mkdtemp(prefix="cari-bench-replicas-"))
    names = ["primary", "replica1", "replica2"]
    pgdatas = [embedded.pgdata_path(folder), folder / "replica1", folder / "replica2"]
    try:
        primary, standbys = await start_nodes(folder, pgdatas, args.chunks)
        queries = load_queries(args.queries)
        nodes = {name: postmaster(pgdata) for name, pgdata in zip(names, pgdatas, strict=True)}
        report: dict[str, Any] = {
            "machine": {"cores": os.cpu_count(), "omp_num_threads": threads},
            "settings": {
                "chunks": args.chunks,
                "concurrency": args.concurrency,
                "duration_s": args.duration,
                "queries": len(queries),
                "shared_buffers_mb": SHARED_BUFFERS_MB,
            },
            "load_average_before": os.getloadavg(),
            "rounds": [],
        }
        for number in range(args.rounds):
            found: dict[str, dict[str, Any]] = {}
            report["rounds"].append(found)
            await measure_round(
                number,
                found,
                primary,
                standbys,
                queries,
                nodes,
                args,
                lambda: save(report, args.out),
            )
        report["load_average_after"] = os.getloadavg()
        report["summary"] = summarize(
            [{setup: found[setup] for setup in SETUPS} for found in report["rounds"]]
        )
        save(report, args.out)
        print()
        print(
            f"{args.chunks:,} chunks; {args.concurrency} clients, {args.duration:g} s per cell, "
            f"{args.rounds} rounds (every other in reverse order); "
            f"query vectors cached (the model does not run in the cells); OMP_NUM_THREADS="
            f"{threads}; {os.cpu_count()} cores shared by every node, the service and the load "
            f"generator; load average before {report['load_average_before'][0]:.2f}, after "
            f"{report['load_average_after'][0]:.2f}"
        )
        print("\n".join(format_table(report["summary"], names)))
    finally:
        for pgdata in pgdatas[1:]:
            with contextlib.suppress(Exception):
                standby.stop(pgdata)
        with contextlib.suppress(Exception):
            embedded.stop(folder, force=True)
        shutil.rmtree(folder, ignore_errors=True)
    print(f"\nJSON: {shown(args.out)}; total runtime {time.perf_counter() - began:.0f} s")


async def start_nodes(folder: Path, pgdatas: list[Path], chunks: int) -> tuple[str, list[str]]:
    """The primary started in `folder` with the corpus loaded, and a standby in each of the
    other `pgdatas`, caught up and prewarmed: the primary's DSN and the standbys'."""
    primary = embedded.start(folder, shared_buffers_mb=SHARED_BUFFERS_MB)
    settings = load_settings(
        database_url=primary, reembed_interval_s=0, statement_timeout_ms=0, embedder="local"
    )
    migrations.upgrade(primary, settings)
    async with open_runtime(settings, dsn=primary) as rt:
        await build_corpus(rt, chunks)
    owner = pgdatas[0].owner() if os.geteuid() == 0 else None
    standbys = []
    for pgdata in pgdatas[1:]:
        started = time.perf_counter()
        standby.create(primary, pgdata, user=owner)
        standbys.append(standby.start(pgdata))
        print(f"{pgdata.name}: copied and started in {time.perf_counter() - started:.1f} s")
    with psycopg.connect(primary, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
    await caught_up(primary, standbys)
    for dsn in (primary, *standbys):
        prewarm(dsn)
    return primary, standbys


async def measure_round(
    number: int,
    found: dict[str, dict[str, Any]],
    primary: str,
    standbys: list[str],
    queries: list[str],
    nodes: dict[str, int],
    args: argparse.Namespace,
    saved: Callable[[], None],
) -> None:
    """Every setup's cells, into `found` as they are measured; `saved` after each setup."""
    # Every other round in reverse: a drift of the machine's load favours no setup.
    order = list(SETUPS) if number % 2 == 0 else list(reversed(SETUPS))
    for setup in order:
        env = {
            **os.environ,
            "CARI_EMBEDDER": "local",
            "CARI_READ_DATABASE_URLS": " ".join(standbys[: SETUPS[setup]]),
            "CARI_QUERY_CACHE_SIZE": str(4 * len(queries)),
        }
        async with served(primary, env) as server:
            await warm(server.url, queries)
            found[setup] = {}
            for mode in args.modes:
                found[setup][mode] = await cell(
                    server.url, queries, mode, args, nodes, server.process.pid
                )
                rps = found[setup][mode]["throughput_rps"]
                print(f"round {number + 1}, {setup}, {mode}: {rps:.1f} req/s", flush=True)
        saved()


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--duration", type=float, default=15.0, help="seconds per cell")
    parser.add_argument(
        "--modes", nargs="+", choices=["keyword", "vector"], default=["keyword", "vector"]
    )
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2, help="of every setup, interleaved")
    parser.add_argument("--max-requests", type=int, default=100_000, help="per cell")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
