"""The whole `cari ingest` path with a fast embedder, against the database's own speed.

    python -m bench.ingest_path [--records 20000] [--maintained 4000] [--batch-size 256]
                                [--workers 2] [--language english] [--profile OUT]

The records are one-chunk JSON Lines documents of ~130 words (consecutive 130-word windows of
the Cranfield and CISI passages, `../shared/eval/datasets/`; beyond ~3,200 records the windows
start again at other offsets), the embedder is `bench.fast_embedder` in a process of its own,
answering 384-d vectors at once. On the same records, in one run, each in a fresh database:

(i)   one raw binary COPY of the chunk rows into `chunks` (HNSW index dropped; the GIN index and
      the BM25 postings triggers fire), and the same COPY with the postings triggers disabled,
      then also without the GIN index: the database's cost of the rows, by component;
(ii)  Cari's writer alone (`store.write_documents` with the precomputed vectors, batches and
      concurrency as the CLI's): deferred (HNSW dropped, load, one build, as `--bulk`) and, on
      the first `--maintained` records, with the HNSW index maintained row by row;
(iii) `cari ingest --bulk` of the JSON Lines file, a subprocess (its start-up included);
(iv)  `cari ingest` without `--bulk` of the first `--maintained` records, into a database whose
      HNSW index is kept;
(v)   the same records over HTTP: `POST …/documents` batches of 100 from 4 concurrent clients
      to a `cari serve` (a subprocess; HNSW kept), from the first request to the last answer.

Prints chunks/s and the ratios (iii)/(ii deferred), (iv) and (v)/(ii maintained); the postings
triggers' share of (i)'s COPY a chunk; and the keyword index's storage a chunk as (iii) leaves
it (its load ends with a fold: with the `cari_bm25` extension, packed blocks). `--profile OUT`
runs (iii) under `py-spy record --format raw` (py-spy must be installed) and writes its stacks
to OUT. Runs on DATABASE_URL's server if set, else on a throwaway embedded server.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx
import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from bench import harness
from bench.fast_embedder import DIMENSION, vector_for
from bench.harness import DATASETS, ROOT, fresh_database, load_average, runtime_on
from bench.load import served
from cari import collection
from cari.cli.documents import SERVICE_BATCH_SIZE
from cari.db.migrations import vector_index_drop_statement, vector_indexes_statement
from cari.db.queries import query
from cari.db.vector_space import space
from cari.embed import Embedder
from cari.ingest import bulk, store
from cari.ingest.formats import Section
from cari.ingest.pipeline import chunk
from cari.schema.collections import CollectionCreate
from cari.settings import Settings, load_settings

CORPORA = (DATASETS / "cranfield", DATASETS / "cisi")
WORDS_PER_RECORD = 130
COLLECTION = "bench"


def make_records(
    count: int, corpora: Sequence[Path] = CORPORA, words_per_record: int = WORDS_PER_RECORD
) -> list[dict[str, str]]:
    """`count` records of `words_per_record` consecutive words of the BEIR corpora's passages
    (all of them, one after the other); at the end the windows start again, shifted."""
    words: list[str] = []
    for folder in corpora:
        with (folder / "corpus.jsonl").open() as corpus:
            for line in corpus:
                words.extend(json.loads(line)["text"].split())
    records, start = [], 0
    for i in range(count):
        text = " ".join(words[start : start + words_per_record])
        records.append({"id": f"r{i}", "title": f"Record {i}", "text": text})
        start = (start + words_per_record) % (len(words) - words_per_record)
    return records


@contextmanager
def fast_embedder(*, frozen: bool = False) -> Iterator[dict[str, str]]:
    """`bench.fast_embedder` running (`--frozen`: one that never answers); yields the CARI_*
    environment that points Cari at it."""
    flags = ["--frozen"] if frozen else []
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.fast_embedder", "--dimension", str(DIMENSION), *flags],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,  # where `bench` is importable
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        if not url:
            raise RuntimeError("bench.fast_embedder did not start")
        yield {
            "CARI_EMBEDDER": "openai",
            "CARI_EMBEDDING_BASE_URL": url,
            "CARI_EMBEDDING_API_KEY": "bench",
            "CARI_EMBEDDING_MODEL": "bench-fast-embedder",
            "CARI_EMBEDDING_DIMENSIONS": str(DIMENSION),
            "CARI_EMBEDDING_MAX_RETRIES": "0",
        }
    finally:
        process.terminate()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


@dataclass(frozen=True, slots=True)
class Rows:
    """The records as Cari stores them: documents, their chunks and the embedder's vectors."""

    prepared: list[store.PreparedDocument]

    @property
    def chunks(self) -> int:
        return sum(len(p.chunks) for p in self.prepared)

    def first(self, documents: int) -> Rows:
        return Rows(self.prepared[:documents])


def prepare(
    records: Sequence[Mapping[str, str]], embedder: Embedder, settings: Settings, source: str
) -> Rows:
    """Chunked as the ingest path chunks (the embedder's token count), vectors as it answers."""
    count_tokens = embedder.count_tokens
    prepared = []
    for record in records:
        document = store.NewDocument(
            record["id"], record["title"], [Section(record["text"])], {}, source
        )
        chunks = chunk(document, count_tokens, settings)
        vectors = [vector_for(store.embedding_text(c.title, c.content)) for c in chunks]
        prepared.append(store.PreparedDocument(document, chunks, vectors))
    return Rows(prepared)


@dataclass(frozen=True, slots=True)
class Report:
    records: int
    chunks: int
    maintained_chunks: int
    raw_copy: float  # chunks/s, the whole COPY
    raw_copy_no_postings: float
    raw_copy_no_postings_no_gin: float
    writer_load: float  # (ii) deferred, the load alone
    writer_build_s: float  # its HNSW build
    writer_deferred: float  # load + build
    writer_maintained: float
    cli_bulk: float  # (iii), the subprocess's wall clock
    cli_bulk_own: float  # (iii) as `cari ingest` reports it (after its start-up)
    cli_maintained: float  # (iv)
    cli_maintained_own: float
    http_batches: float  # (v)
    stored: dict[str, int]  # chunks stored per stage, to check every stage wrote every chunk
    # PostgreSQL's time in the BM25 functions during (ii)'s load (track_functions; empty if the
    # server refused to track them: it takes a superuser), summed over the writers' sessions.
    functions: dict[str, float]
    # After (iii): bytes of each keyword-index relation, and counts (see _keyword_storage).
    storage: dict[str, int]


async def run(
    records: Sequence[Mapping[str, str]],
    *,
    maintained: int,
    batch_size: int,
    workers: int,
    language: str,
    settings: Settings,
    env: Mapping[str, str],
    prefix: str = "cari_bench_ingest_path",
    profile: Path | None = None,
) -> Report:
    """Every stage on `records` (see the module docstring), each in a fresh database on
    `settings`' server; `env` is the CLI's environment (its CARI_* point at the embedder)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "records.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
        head = Path(folder) / "head.jsonl"
        head.write_text("".join(json.dumps(r) + "\n" for r in records[:maintained]))
        dsn = await _database(f"{prefix}_raw", settings, language)
        async with runtime_on(dsn, settings) as rt:
            # The CLI names a file's documents' source by its path as typed: the same here.
            rows = prepare(records, rt.embedder, settings, str(path))
        small = rows.first(maintained)
        stored: dict[str, int] = {}

        raw = {
            variant: await raw_copy(dsn, settings, rows, variant)
            for variant in ("full", "no_postings", "no_postings_no_gin")
        }

        dsn = await _database(f"{prefix}_writer", settings, language)
        tracked = await _track_functions(dsn, settings)
        load, build = await writer(dsn, settings, rows, batch_size, workers, defer=True)
        stored["writer_deferred"] = await _stored(dsn, settings)
        functions = await _function_seconds(dsn, settings) if tracked else {}

        dsn = await _database(f"{prefix}_cli_bulk", settings, language)
        options = ["--bulk", "--batch-size", str(batch_size), "--workers", str(workers)]
        cli_bulk, cli_bulk_own = cli(dsn, env, path, options, profile)
        stored["cli_bulk"] = await _stored(dsn, settings)
        storage = await _keyword_storage(dsn, settings)

        dsn = await _database(f"{prefix}_writer_hnsw", settings, language)
        load_kept, _ = await writer(dsn, settings, small, batch_size, workers, defer=False)
        stored["writer_maintained"] = await _stored(dsn, settings)

        dsn = await _database(f"{prefix}_cli", settings, language)
        options = ["--batch-size", str(batch_size), "--workers", str(workers)]
        cli_kept, cli_kept_own = cli(dsn, env, head, options, None)
        stored["cli_maintained"] = await _stored(dsn, settings)

        dsn = await _database(f"{prefix}_http", settings, language)
        http_seconds = await http_batches(dsn, env, records[:maintained])
        stored["http"] = await _stored(dsn, settings)

    return Report(
        records=len(records),
        chunks=rows.chunks,
        maintained_chunks=small.chunks,
        raw_copy=rows.chunks / raw["full"],
        raw_copy_no_postings=rows.chunks / raw["no_postings"],
        raw_copy_no_postings_no_gin=rows.chunks / raw["no_postings_no_gin"],
        writer_load=rows.chunks / load,
        writer_build_s=build,
        writer_deferred=rows.chunks / (load + build),
        writer_maintained=small.chunks / load_kept,
        cli_bulk=rows.chunks / cli_bulk,
        cli_bulk_own=cli_bulk_own,
        cli_maintained=small.chunks / cli_kept,
        cli_maintained_own=cli_kept_own,
        http_batches=small.chunks / http_seconds,
        stored=stored,
        functions=functions,
        storage=storage,
    )


# The keyword index's relations, as `cari ingest --bulk` leaves them (its load ends with a fold).
KEYWORD_STORAGE = (
    "postings",
    "bm25_delta",
    "bm25_blocks",
    "bm25_dead",
    "bm25_terms",
    "bm25_pending_terms",
    "bm25_sizes",
    "bm25_pending_sizes",
)


async def _keyword_storage(dsn: str, settings: Settings) -> dict[str, int]:
    """Bytes of each keyword-index relation (indexes and TOAST included) after VACUUM, the
    engine, and the rows of postings and blocks."""
    async with runtime_on(dsn, settings) as rt, rt.pool.connection() as conn:
        await conn.set_autocommit(True)
        await conn.execute("VACUUM (ANALYZE)")
        sizes = {}
        for name in KEYWORD_STORAGE:
            cur = await conn.execute("SELECT pg_total_relation_size(%s::regclass)", (name,))
            sizes[name] = int((await cur.fetchone() or (0,))[0])
        cur = await conn.execute(
            "SELECT (SELECT count(*) FROM postings), (SELECT count(*) FROM bm25_blocks), "
            "(SELECT coalesce(sum(n), 0) FROM bm25_blocks), "
            "(SELECT count(*) FROM pg_extension WHERE extname = 'cari_bm25')"
        )
        rows, blocks, packed, extension = await cur.fetchone() or (0, 0, 0, 0)
        sizes |= {"postings rows": rows, "blocks rows": blocks, "packed postings": packed}
        sizes["extension"] = extension
        return sizes


async def _database(name: str, settings: Settings, language: str) -> str:
    """A fresh, migrated database holding the collection the stages write into."""
    dsn = await anyio.to_thread.run_sync(fresh_database, name, settings)
    async with runtime_on(dsn, settings) as rt, rt.pool.connection() as conn:
        spec = CollectionCreate(name=COLLECTION, language=language)
        await collection.create(conn, spec, settings)
    return dsn


async def _stored(dsn: str, settings: Settings) -> int:
    async with runtime_on(dsn, settings) as rt, rt.pool.connection() as conn:
        cur = await conn.execute("SELECT count(*) FROM chunks WHERE embedding IS NOT NULL")
        row = await cur.fetchone()
        return int(row[0]) if row else 0


async def _track_functions(dsn: str, settings: Settings) -> bool:
    """Have the database's new sessions time its PL/pgSQL functions; false if not allowed."""
    async with runtime_on(dsn, settings) as rt, rt.pool.connection() as conn:
        try:
            name = sql.Identifier(conn.info.dbname)
            await conn.execute(sql.SQL("ALTER DATABASE {} SET track_functions = 'pl'").format(name))
        except psycopg.errors.InsufficientPrivilege:
            return False
    return True


async def _function_seconds(dsn: str, settings: Settings) -> dict[str, float]:
    """Seconds spent in each BM25 function (the sessions that ran them have ended)."""
    async with runtime_on(dsn, settings) as rt, rt.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT funcname, total_time / 1000 FROM pg_stat_user_functions"
            " WHERE funcname IN ('bm25_index', 'bm25_compact') ORDER BY 1"
        )
        return {str(name): float(seconds) for name, seconds in await cur.fetchall()}


async def raw_copy(dsn: str, settings: Settings, rows: Rows, variant: str) -> float:
    """Seconds for one binary COPY of every chunk row (HNSW index dropped; rolled back after):
    `full` with the GIN index and the postings triggers, `no_postings` with the triggers
    disabled, `no_postings_no_gin` also without the GIN index on `tsv`."""
    async with runtime_on(dsn, settings) as rt, rt.pool.connection() as conn:
        collection = await store.collection_ref(conn, COLLECTION)
        async with conn.transaction(force_rollback=True):
            # The documents first (untimed): the rows are the chunks' alone.
            every, _ = store.EVERY_DOCUMENT
            cur = await conn.execute(
                sql.SQL(query("documents_upsert")).format(filters=every),
                {
                    "collection_id": collection.id,
                    "external_ids": [p.document.external_id for p in rows.prepared],
                    "titles": [p.document.title for p in rows.prepared],
                    "sources": [p.document.source for p in rows.prepared],
                    "metadata": [Jsonb(p.document.metadata) for p in rows.prepared],
                    "content_hashes": [p.document.content_hash for p in rows.prepared],
                },
            )
            ids = {external_id: id for external_id, id, _ in await cur.fetchall()}
            await conn.execute(
                vector_index_drop_statement(space(settings.embedding_dimension, settings))
            )
            if variant != "full":
                await conn.execute("ALTER TABLE chunks DISABLE TRIGGER bm25_chunks_inserted")
            if variant == "no_postings_no_gin":
                await conn.execute("DROP INDEX chunks_tsv_idx")
            started = time.perf_counter()
            async with conn.cursor().copy(query("chunks_copy")) as copy:
                copy.set_types(store.CHUNK_COLUMN_TYPES)
                for item in rows.prepared:
                    assert item.vectors is not None
                    for c, vector in zip(item.chunks, item.vectors, strict=True):
                        await copy.write_row(
                            (
                                collection.id,
                                ids[item.document.external_id],
                                c.ordinal,
                                c.title,
                                c.content,
                                Jsonb(c.metadata),
                                collection.language,
                                c.token_count,
                                vector,
                            )
                        )
            return time.perf_counter() - started


async def writer(
    dsn: str, settings: Settings, rows: Rows, batch_size: int, workers: int, *, defer: bool
) -> tuple[float, float]:
    """Seconds to load through `store.write_documents`, `batch_size` documents a call and
    `workers` calls at once, folding the BM25 statistics every `bulk.COMPACT_EVERY_S` and at
    the end (as `cari ingest` does); then to build the HNSW index if `defer` dropped it."""
    batches = [rows.prepared[i : i + batch_size] for i in range(0, len(rows.prepared), batch_size)]
    async with runtime_on(dsn, settings) as rt:
        pool = rt.pool
        async with pool.connection() as conn:
            collection = await store.collection_ref(conn, COLLECTION)
            if defer:
                await conn.execute(
                    vector_index_drop_statement(space(settings.embedding_dimension, settings))
                )
        queue = iter(batches)
        next_compaction = time.monotonic() + bulk.COMPACT_EVERY_S

        async def work() -> None:
            nonlocal next_compaction
            for batch in queue:  # the workers share one iterator: each batch is taken once
                async with pool.connection() as conn:
                    await store.write_documents(conn, collection, batch, compact=False)
                    if time.monotonic() >= next_compaction:
                        next_compaction = time.monotonic() + bulk.COMPACT_EVERY_S
                        await store.compact_statistics(conn, collection)

        started = time.perf_counter()
        async with anyio.create_task_group() as tasks:
            for _ in range(workers):
                tasks.start_soon(work)
        async with pool.connection() as conn:
            await store.compact_statistics(conn, collection)
        loaded = time.perf_counter()
        if defer:
            async with pool.connection() as conn, conn.transaction():
                await conn.execute(vector_indexes_statement(settings))
        return loaded - started, time.perf_counter() - loaded


# Python stages of `cari ingest`, in the order a sample is tested against them: a sample goes to
# the first stage a frame of its stack matches (the hash is computed inside the writer too).
STAGES = [
    ("start-up (imports)", re.compile(r"_find_and_load")),
    ("hash check", re.compile(r"\bcontent_hash \(|\bstored_hashes \(")),
    ("chunking + token counting", re.compile(r"\b(_chunk_all|chunk_document|count_tokens) \(")),
    ("vector decoding", re.compile(r"\b_vectors? \(cari/embed\.py")),
    # Anything else in the embedder: the requests, also in the tasks it starts per request.
    ("embedding requests (SDK, HTTP, JSON)", re.compile(r"cari/embed\.py")),
    ("BM25 compaction", re.compile(r"\bcompact_statistics \(")),
    ("writer (upsert, COPY rows)", re.compile(r"\bwrite_documents \(")),
    ("reading + validating", re.compile(r"cari/ingest/(files|formats)\.py|\b_next_batch \(")),
    ("HNSW build (waiting)", re.compile(r"\bingest_sources \(cari/ingest/bulk\.py")),
    ("progress display", re.compile(r"rich/|\bshow \(cari/cli")),
]


# A sample whose innermost frame waits (on a lock, a queue, the selector) is idle.
IDLE = re.compile(
    r"(Condition\.wait|Event\.wait|EpollSelector\.select"
    r"|_worker \(concurrent/futures/thread\.py:81\))[^;]*$"
)


def stages(raw: str, rate: int = 100) -> dict[str, float]:
    """CPU seconds per stage from py-spy's raw output (`stack count` lines at `rate` Hz);
    samples of threads waiting (py-spy counts some waits as active) are left out."""
    seconds = {name: 0.0 for name, _ in STAGES} | {"other (event loop, pool, I/O)": 0.0}
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or IDLE.search(stack):
            continue
        name = next((n for n, p in STAGES if p.search(stack)), "other (event loop, pool, I/O)")
        seconds[name] += int(count) / rate
    return seconds


# "2000 chunks in 4.5 s (440.6 chunks/s)": the rate, as the seconds are rounded to 0.1 s.
SUMMARY = re.compile(r"(\d+) chunks in [\d.]+ s \(([\d.]+) chunks/s\)")


def cli(
    dsn: str, env: Mapping[str, str], path: Path, options: Sequence[str], profile: Path | None
) -> tuple[float, float]:
    """`cari ingest PATH` into a new collection as a subprocess: its wall-clock seconds and the
    rate it reports itself (chunks/s from its first batch's start to its end)."""
    command = [
        sys.executable,
        "-m",
        "cari.cli",
        "ingest",
        str(path),
        "-c",
        COLLECTION,
        *options,
    ]
    if profile is not None:
        spy = ["py-spy", "record", "--format", "raw", "--rate", "100", "-o", str(profile)]
        command = [*spy, "--", *command]
    environment = {**env, "DATABASE_URL": dsn, "CARI_DATABASE_URL": dsn}
    environment["CARI_REEMBED_INTERVAL_S"] = "0"
    started = time.perf_counter()
    done = subprocess.run(command, env=environment, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    summary = SUMMARY.search(done.stderr)
    if done.returncode != 0 or summary is None:
        raise RuntimeError(f"cari ingest failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds, float(summary.group(2))


HTTP_CLIENTS = 4
HTTP_BATCH = 100


async def http_batches(
    dsn: str, env: Mapping[str, str], records: Sequence[Mapping[str, str]]
) -> float:
    """(v): seconds for `HTTP_CLIENTS` clients to POST `records` to a `cari serve` on `dsn` in
    batches of `HTTP_BATCH`, each client sending its next batch once the last is answered."""
    batches = [list(records[i : i + HTTP_BATCH]) for i in range(0, len(records), HTTP_BATCH)]
    url = f"/v1/collections/{COLLECTION}/documents"
    # Its start-up is not part of the figure: `served` yields once it is ready.
    async with (
        served(dsn, {**env, "CARI_LOG_LEVEL": "WARNING"}) as server,
        httpx.AsyncClient(base_url=server.url, timeout=600) as client,
    ):

        async def send() -> None:
            while batches:
                answer = await client.post(url, json={"documents": batches.pop()})
                if answer.status_code != 200 or answer.json()["rejected"]:
                    raise RuntimeError(f"a batch failed: {answer.text[:500]}")

        started = time.perf_counter()
        async with anyio.create_task_group() as clients:
            for _ in range(HTTP_CLIENTS):
                clients.start_soon(send)
        return time.perf_counter() - started


def show(report: Report, load: str) -> None:
    r = report
    print(
        f"{r.records} records, {r.chunks} chunks; --maintained slice: {r.maintained_chunks} "
        f"chunks; load average at the start {load}"
    )
    rows = [
        ("(i)   raw COPY (postings, GIN; no HNSW)", r.raw_copy, ""),
        ("        postings triggers disabled", r.raw_copy_no_postings, ""),
        ("        and no GIN index", r.raw_copy_no_postings_no_gin, ""),
        ("(ii)  writer, HNSW deferred: load", r.writer_load, ""),
        (
            f"        + HNSW build ({r.writer_build_s:.1f} s)",
            r.writer_deferred,
            "(ii-d) baseline",
        ),
        ("      writer, HNSW maintained", r.writer_maintained, "(ii-m) baseline"),
        (
            "(iii) cari ingest --bulk (wall)",
            r.cli_bulk,
            f"/(ii-d) = {r.cli_bulk / r.writer_deferred:.3f}",
        ),
        (
            "        as it reports itself",
            r.cli_bulk_own,
            f"/(ii-d) = {r.cli_bulk_own / r.writer_deferred:.3f}",
        ),
        (
            "(iv)  cari ingest, HNSW kept (wall)",
            r.cli_maintained,
            f"/(ii-m) = {r.cli_maintained / r.writer_maintained:.3f}",
        ),
        (
            "        as it reports itself",
            r.cli_maintained_own,
            f"/(ii-m) = {r.cli_maintained_own / r.writer_maintained:.3f}",
        ),
        (
            f"(v)   HTTP, {HTTP_CLIENTS} clients x {HTTP_BATCH}-document batches",
            r.http_batches,
            f"/(ii-m) = {r.http_batches / r.writer_maintained:.3f}",
        ),
    ]
    for name, rate, note in rows:
        print(f"{name:42s} {rate:8.0f} chunks/s   {note}")
    share = (1 / r.raw_copy - 1 / r.raw_copy_no_postings) * 1000
    print(
        f"the postings triggers' share of (i)'s COPY: {share:.3f} ms a chunk "
        f"({1000 / r.raw_copy:.3f} - {1000 / r.raw_copy_no_postings:.3f}; target <= 0.15 ms: "
        f"{'MET' if share <= 0.15 else 'MISSED'}); `cari ingest --bulk` {r.cli_bulk:,.0f} "
        f"chunks/s wall (target >= 1,500: {'MET' if r.cli_bulk >= 1500 else 'MISSED'})"
    )
    st = dict(r.storage)
    counts = {k: st.pop(k) for k in ("postings rows", "blocks rows", "packed postings")}
    engine = "cari_bm25" if st.pop("extension") else "sql (no extension)"
    keyword = sum(st.values())
    print(
        f"keyword index after (iii) (engine {engine}; {counts['postings rows']:,} postings rows "
        f"in the delta, {counts['blocks rows']:,} blocks holding {counts['packed postings']:,} "
        f"postings), bytes a chunk, indexes and TOAST included:"
    )
    for name, size in st.items():
        print(f"  {name:20s} {size / r.chunks:10,.0f}")
    postings = st["postings"] + st.get("bm25_delta", 0) + st["bm25_blocks"] + st["bm25_dead"]
    print(
        f"  postings storage (delta + blocks + dead): {postings / r.chunks:,.0f} B a chunk "
        f"(target <= 3 KB: {'MET' if postings / r.chunks <= 3072 else 'MISSED'}); with the "
        f"statistics tables {keyword / r.chunks:,.0f}"
    )
    if r.functions:
        spent = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in r.functions.items())
        print(f"(ii) deferred, PostgreSQL's time in the BM25 functions: {spent}")


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--maintained", type=int, default=4_000)
    parser.add_argument("--batch-size", type=int, default=SERVICE_BATCH_SIZE)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--language", default="english")
    parser.add_argument("--profile", type=Path)
    args = parser.parse_args()
    records = make_records(args.records)
    load = load_average()
    with fast_embedder() as env:
        settings = load_settings(
            **{k.removeprefix("CARI_").lower(): v for k, v in env.items()},
            reembed_interval_s=0,
            statement_timeout_ms=0,
        )
        report = asyncio.run(
            run(
                records,
                settings=settings,
                maintained=min(args.maintained, args.records),
                batch_size=args.batch_size,
                workers=args.workers,
                language=args.language,
                env={**os.environ, **env},
                profile=args.profile,
            )
        )
    show(report, load)
    if args.profile is not None:
        print(f"(iii)'s Python CPU by stage (py-spy, {args.profile}):")
        for name, seconds in stages(args.profile.read_text()).items():
            print(f"  {name:40s} {seconds:6.2f} s")
    print("load average at the end", load_average())


if __name__ == "__main__":
    main()
