"""A `--bulk` load beside live writes to another collection, and a service's recovery from its
database's crash.

    OMP_NUM_THREADS=1 python -m bench.bulk_isolation [--live 20000] [--records 2000]
                                                     [--writers 2] [--kills 3]

(1) A collection `live` holds `--live` one-chunk documents (384-d, HNSW built). A `cari serve`
subprocess takes PUTs of new documents to `live` from `--writers` concurrent clients while a
load of `--records` one-chunk JSON Lines records (~130 words of Cranfield and CISI each,
bench.ingest_path's) runs into a new collection `bulk`, in a process of its own:

- *before*: the statement sequence `--bulk` ran until this change, frozen here as the same-run
  baseline: the width's HNSW index dropped whoever shares it, the load, a plain CREATE INDEX (a
  SHARE lock on the whole chunks table for the build) in a transaction;
- *after*: `cari.ingest.bulk.ingest_sources(defer_index=True)` as `cari ingest --bulk` runs it.

Each in two layouts: `bulk` embedded at `live`'s width (384: the index is shared) and at a width
of its own (768, a CARI_EMBEDDERS profile). Printed per run: the PUTs during the load (count,
errors, p50/p95/p99/max, client-measured), the load's chunks/s including its index build, and
how many EXPLAINs of `live`'s vector statement sampled during the load used its HNSW index.

(2) `cari serve` on the embedded PostgreSQL (CARI_DATA_DIR), its postmaster killed (SIGKILL)
`--kills` times: the time from the restarted database accepting connections to the service
answering a PUT again, and from the kill to that answer.

The embedder is bench.fast_embedder in a process of its own. Runs on DATABASE_URL's server if
set, else on a throwaway embedded server (part 2 always on a throwaway embedded one).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx
import psycopg
from psycopg import sql

from bench import harness
from bench.fast_embedder import vector_for
from bench.harness import ROOT, fresh_database, runtime_on
from bench.ingest_path import (
    CORPORA,
    WORDS_PER_RECORD,
    fast_embedder,
    make_records,
)
from bench.load import free_port, served
from cari.db import embedded, migrations
from cari.db.migrations import vector_index_drop_statement, vector_indexes_statement
from cari.db.queries import query
from cari.db.vector_space import space
from cari.ingest import bulk, files, store
from cari.ingest.bulk import Tally
from cari.ingest.pipeline import Ingestor
from cari.runtime import open_runtime
from cari.settings import Settings, load_settings

LIVE_WIDTH = 384
OWN_WIDTH = 768
LIVE = "live"
BULK = "bulk"


def embedders(env: Mapping[str, str]) -> str:
    """CARI_EMBEDDERS: the fast embedder at a width no other collection uses."""
    profile = {
        "model": env["CARI_EMBEDDING_MODEL"],
        "dimensions": OWN_WIDTH,
        "base_url": env["CARI_EMBEDDING_BASE_URL"],
        "api_key": "bench",
    }
    return json.dumps({"own": profile})


async def before(ingestor: Ingestor, collection: str, sources: Sequence[files.InputFile]) -> Tally:
    """`--bulk` as it was: the width's index dropped whoever shares it, rebuilt by a plain
    CREATE INDEX in a transaction (frozen here as the baseline)."""
    async with ingestor.pool.connection() as lock:
        ref = await store.collection_ref(lock, collection)
        width = space(ingestor.embedders.get(ref.embedder).dimension, ingestor.settings)
        await lock.execute(query("vector_index_lock"))
        try:
            await lock.execute(vector_index_drop_statement(width))
            try:
                return await bulk._ingest(
                    ingestor, collection, sources, 256, 2, lambda _: None, Tally()
                )
            finally:
                async with lock.transaction():
                    await lock.execute(vector_indexes_statement(ingestor.settings))
        finally:
            await lock.execute(query("vector_index_unlock"))


async def after(ingestor: Ingestor, collection: str, sources: Sequence[files.InputFile]) -> Tally:
    return await bulk.ingest_sources(
        ingestor, collection, sources, batch_size=256, workers=2, defer_index=True
    )


def load(variant: str, dsn: str, path: Path) -> None:
    """The load alone, in this process (run by `--load`): prints its chunks and seconds."""
    settings = load_settings()

    async def main() -> None:
        async with open_runtime(settings, dsn=dsn) as rt:
            started = time.time()  # wall clock: the benchmark's process compares it with its own
            run = before if variant == "before" else after
            tally = await run(rt.ingestor, BULK, files.expand([str(path)]))
            ended = time.time()
        assert not tally.failures, tally.failures[:3]
        print(json.dumps({"chunks": tally.chunks, "started": started, "ended": ended}))

    anyio.run(main)


@dataclass(frozen=True, slots=True)
class Run:
    variant: str
    layout: str
    writes: list[float]  # seconds, the PUTs answered 2xx during the load
    errors: int
    chunks: int
    seconds: float
    plans: int
    indexed_plans: int

    def line(self) -> str:
        ms = sorted(w * 1000 for w in self.writes)
        q = statistics.quantiles(ms, n=100, method="inclusive") if len(ms) > 1 else ms * 99
        return (
            f"{self.variant:6} {self.layout:10} PUTs {len(ms):5} errors {self.errors:3} "
            f"p50 {q[49]:8.1f} p95 {q[94]:8.1f} p99 {q[98]:8.1f} max {ms[-1]:8.1f} ms | "
            f"load {self.chunks / self.seconds:7.1f} chunks/s ({self.seconds:5.1f} s) | "
            f"live searches on HNSW {self.indexed_plans}/{self.plans}"
        )


async def seed_live(dsn: str, settings: Settings, records: Sequence[Mapping[str, str]]) -> None:
    """The records as one-chunk documents in `live`, written by COPY with the index dropped,
    then the index built (as a bulk load would leave them)."""
    count = len(records)
    width = space(LIVE_WIDTH, settings)
    async with runtime_on(dsn, settings) as rt, rt.pool.connection() as conn:
        ref = await store.collection_ref(conn, LIVE)
        async with conn.transaction():
            (simple,) = await (
                await conn.execute("SELECT 'english'::regconfig::oid")
            ).fetchone() or (0,)
            await conn.execute(vector_index_drop_statement(width))
            cursor = await conn.execute(
                "INSERT INTO documents (collection_id, external_id, content_hash) "
                "SELECT %s, 'seed-' || i, '' FROM generate_series(0, %s - 1) AS i RETURNING id",
                (ref.id, count),
            )
            ids = [row[0] for row in await cursor.fetchall()]
            async with conn.cursor().copy(
                "COPY chunks (collection_id, document_id, ordinal, content, language, embedding) "
                "FROM STDIN WITH (FORMAT BINARY)"
            ) as copy:
                copy.set_types(["int8", "int8", "int4", "text", "oid", "vector"])
                for document, record in zip(ids, records, strict=True):
                    vector = vector_for(record["text"], LIVE_WIDTH)
                    await copy.write_row((ref.id, document, 0, record["text"], simple, vector))
        async with conn.transaction():
            await conn.execute(vector_indexes_statement(settings))
        await conn.execute("ANALYZE chunks")


async def live_plan(conn: psycopg.AsyncConnection[tuple[object, ...]], live_id: int) -> bool:
    """Whether `live`'s vector statement reads its width's HNSW index."""
    width = space(LIVE_WIDTH, load_settings())
    statement = width.statement("search_vector", filters=sql.SQL(""), alias=sql.Identifier("c"))
    vector = "[" + ",".join(str(float(x)) for x in vector_for("harbour", LIVE_WIDTH)) + "]"
    cursor = await conn.execute(
        sql.SQL("EXPLAIN ") + statement,
        {"vector": vector, "collection_id": live_id, "candidates": 10},
    )
    return width.index_name("chunks") in "\n".join(str(r[0]) for r in await cursor.fetchall())


async def one_run(
    variant: str, layout: str, dsn: str, url: str, path: Path, env: Mapping[str, str], writers: int
) -> Run:
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        body: dict[str, object] = {"name": BULK}
        if layout == "own-width":
            body["embedder"] = "own"
        response = await http.post("/v1/collections", json=body)
        assert response.status_code == 201, response.text
        command = [sys.executable, "-m", "bench.bulk_isolation", "--load", variant, dsn, str(path)]
        process = await asyncio.create_subprocess_exec(
            *command,
            env={**os.environ, **env},
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
        )
        writes: list[tuple[float, float]] = []  # wall-clock start and end of each 2xx PUT
        errors = 0
        plans: list[bool] = []
        done = asyncio.Event()

        async def write(writer: int) -> None:
            nonlocal errors
            n = 0
            while not done.is_set():
                key = f"{variant}-{layout}-{writer}-{n}"
                text = f"Live note {n} from writer {writer} about harbours and tides."
                started = time.time()
                response = await http.put(
                    f"/v1/collections/{LIVE}/documents/{key}", json={"text": text}
                )
                if response.status_code < 300:
                    writes.append((started, time.time()))
                else:
                    errors += 1
                n += 1

        async def sample() -> None:
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
                ref = await store.collection_ref(conn, LIVE)
                while not done.is_set():
                    plans.append(await live_plan(conn, ref.id))
                    await asyncio.sleep(0.5)

        tasks = [asyncio.create_task(write(w)) for w in range(writers)]
        tasks.append(asyncio.create_task(sample()))
        output, _ = await process.communicate()
        done.set()
        await asyncio.gather(*tasks)
        assert process.returncode == 0, output
        result = json.loads(output.decode().strip().splitlines()[-1])
        response = await http.delete(f"/v1/collections/{BULK}")
        assert response.status_code in (200, 204), response.text
    migrations.ensure_vector_indexes(dsn, load_settings())
    # The PUTs whose time overlapped the load's (its process's start-up left out).
    first, last = float(result["started"]), float(result["ended"])
    during = [end - start for start, end in writes if end > first and start < last]
    return Run(
        variant, layout, during, errors, int(result["chunks"]), last - first, len(plans), sum(plans)
    )


async def isolation(
    live: int,
    records: int,
    writers: int,
    env: Mapping[str, str],
    corpora: Sequence[Path] = CORPORA,
    words_per_record: int = WORDS_PER_RECORD,
) -> list[Run]:
    """Part (1), each layout before and after; `env` points Cari at the embedder (and is in
    this process's environment too)."""
    settings = load_settings()
    dsn = fresh_database("cari_bench_bulk_isolation", settings)
    migrations.ensure_vector_indexes(dsn, settings)
    runs = []
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "records.jsonl"
        texts = make_records(live + records, corpora, words_per_record)
        path.write_text("".join(json.dumps(r) + "\n" for r in texts[live:]))
        async with served(dsn, env) as server:
            async with httpx.AsyncClient(base_url=server.url) as http:
                assert (await http.post("/v1/collections", json={"name": LIVE})).status_code == 201
            await seed_live(dsn, settings, texts[:live])
            for layout in ("same-width", "own-width"):
                for variant in ("before", "after"):
                    run = await one_run(variant, layout, dsn, server.url, path, env, writers)
                    print(run.line(), flush=True)
                    runs.append(run)
    return runs


def recovery(kills: int, env: Mapping[str, str]) -> list[tuple[float, float]]:
    """(accepting → serving, kill → serving) seconds for each postmaster kill."""
    timings = []
    with tempfile.TemporaryDirectory(prefix="cari-bench-") as folder:
        data_dir = Path(folder) / "data"
        port = free_port()
        environment = {
            k: v for k, v in os.environ.items() if not k.startswith("CARI_") and k != "DATABASE_URL"
        }
        environment |= {**env, "CARI_DATA_DIR": str(data_dir), "CARI_REEMBED_INTERVAL_S": "0"}
        process = subprocess.Popen(
            [sys.executable, "-m", "cari.cli", "serve", "--port", str(port)],
            env=environment,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            with httpx.Client(base_url=url, timeout=10) as http:
                deadline = time.monotonic() + 120
                while not _answers(http, "/readyz"):
                    assert time.monotonic() < deadline, "cari serve did not start"
                    time.sleep(0.1)
                assert http.post("/v1/collections", json={"name": LIVE}).status_code == 201
                pid_file = embedded.pgdata_path(data_dir) / "postmaster.pid"
                for kill in range(kills):
                    postmaster = int(pid_file.read_text().split()[0])
                    accepted: list[float] = []
                    watcher = threading.Thread(
                        target=_watch, args=(data_dir, postmaster, accepted), daemon=True
                    )
                    os.kill(postmaster, signal.SIGKILL)
                    killed = time.monotonic()
                    watcher.start()
                    n = 0
                    while True:
                        assert time.monotonic() - killed < 120, "not back within 120 s"
                        response = http.put(
                            f"/v1/collections/{LIVE}/documents/k{kill}-{n}",
                            json={"text": f"note {n}"},
                        )
                        n += 1
                        if response.status_code < 300:
                            break
                        time.sleep(0.02)
                    serving = time.monotonic()
                    watcher.join()
                    timings.append((serving - accepted[0], serving - killed))
                    print(
                        f"kill {kill + 1}: serving {serving - accepted[0]:.2f} s after the "
                        f"database accepted connections ({serving - killed:.2f} s after the kill)",
                        flush=True,
                    )
                    time.sleep(2)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(60)
    return timings


def _answers(http: httpx.Client, path: str) -> bool:
    try:
        return http.get(path).status_code == 200
    except httpx.TransportError:
        return False


def _watch(data_dir: Path, killed: int, accepted: list[float]) -> None:
    """Appends the moment a new postmaster accepts connections (polled every 10 ms)."""
    while not _accepts(data_dir, killed):
        time.sleep(0.01)
    accepted.append(time.monotonic())


def _accepts(data_dir: Path, killed: int) -> bool:
    """Whether a new postmaster (not `killed`) accepts connections."""
    try:
        pid = int((embedded.pgdata_path(data_dir) / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return False
    try:
        dsn = embedded.running_dsn(data_dir)
    except AssertionError:  # the new postmaster is still writing its pid file
        return False
    if pid == killed or dsn is None:
        return False
    try:
        with psycopg.connect(dsn, connect_timeout=1):
            return True
    except psycopg.OperationalError:
        return False


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--live", type=int, default=20_000)
    parser.add_argument("--records", type=int, default=2_000)
    parser.add_argument("--writers", type=int, default=2)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument(
        "--load", nargs=3, metavar=("VARIANT", "DSN", "PATH"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.load:
        load(args.load[0], args.load[1], Path(args.load[2]))
        return
    print(f"OMP_NUM_THREADS={harness.omp_note()}")
    with fast_embedder() as env:
        env = {**env, "CARI_EMBEDDERS": embedders(env)}
        os.environ.update(env)
        print(
            f"(1) --bulk of {args.records} records beside {args.writers} writers to a "
            f"collection of {args.live} chunks"
        )
        runs = asyncio.run(isolation(args.live, args.records, args.writers, env))
        for layout in ("same-width", "own-width"):
            old, new = (r for r in runs if r.layout == layout)
            p99 = [
                statistics.quantiles(r.writes, n=100, method="inclusive")[98] for r in (old, new)
            ]
            rate = [r.chunks / r.seconds for r in (old, new)]
            print(
                f"{layout}: PUT p99 after/before {p99[1] / p99[0]:.3f}, "
                f"load chunks/s after/before {rate[1] / rate[0]:.3f}"
            )
        if args.kills:
            print(f"(2) postmaster killed {args.kills} times under `cari serve`")
            timings = recovery(args.kills, env)
            back = [t[0] for t in timings]
            print(
                f"accepting → serving: median {statistics.median(back):.2f} s, "
                f"max {max(back):.2f} s"
            )


if __name__ == "__main__":
    main()
