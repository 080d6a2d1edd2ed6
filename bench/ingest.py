"""Ingestion throughput, measured against baselines in the same run.

    python -m bench.ingest [--dataset DIR] [--documents N] [--rows N]

(a) the configured embedder (the local model by default) alone on the chunk texts of N
    documents of a BEIR-format dataset;
(b) the whole `cari ingest` path on the same documents (read JSON Lines, hash check, chunk,
    embed, binary COPY in one transaction per batch) — (b)/(a) is the ingest overhead;
(c) chunk rows per second through Cari's writer with precomputed 384-d vectors, against one
    raw binary COPY of the same rows into the same table (both keep the GIN and HNSW indexes).

Runs on DATABASE_URL if set, else on a throwaway embedded server.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from pathlib import Path

import numpy as np
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from bench import harness
from bench.harness import fresh_runtime
from cari.db.migrations import vector_index_drop_statement, vector_indexes_statement
from cari.db.queries import query
from cari.db.vector_space import space
from cari.ingest import store
from cari.ingest.bulk import ingest_sources
from cari.ingest.chunking import NewChunk
from cari.ingest.files import InputFile
from cari.ingest.formats import Section
from cari.ingest.pipeline import chunk
from cari.settings import Settings, load_settings

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATASET = ROOT.parent / "shared" / "eval" / "datasets" / "cisi"


def load_records(dataset: Path, limit: int) -> list[dict[str, str]]:
    records = []
    with (dataset / "corpus.jsonl").open() as corpus:
        for line in corpus:
            row = json.loads(line)
            records.append(
                {"id": str(row["_id"]), "title": row.get("title", ""), "text": row["text"]}
            )
            if len(records) == limit:
                break
    return records


async def run(dataset: Path, documents: int, rows: int) -> None:
    settings = load_settings(reembed_interval_s=0, statement_timeout_ms=0)
    async with fresh_runtime("cari_bench_ingest", settings) as rt:
        pool, embedder = rt.pool, rt.embedder
        records = load_records(dataset, documents)

        # (a) the embedder alone, on exactly the texts the ingest path will embed
        chunks: list[NewChunk] = []
        for r in records:
            document = store.NewDocument(r["id"], r["title"], [Section(r["text"])], {}, None)
            chunks += chunk(document, embedder.count_tokens, settings)
        texts = [store.embedding_text(c.title, c.content) for c in chunks]
        await embedder.embed_documents(texts[:4])  # warm the model

        async def embedder_alone() -> float:
            started = time.perf_counter()
            await embedder.embed_documents(texts)
            return len(texts) / (time.perf_counter() - started)

        before = await embedder_alone()

        # (b) the whole path, from a JSON Lines file
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "corpus.jsonl"
            path.write_text("\n".join(json.dumps(r) for r in records))
            async with pool.connection() as conn:
                await conn.execute("INSERT INTO collections (name) VALUES ('bench')")
            started = time.perf_counter()
            tally = await ingest_sources(
                rt.ingestor,
                "bench",
                [InputFile(path, "corpus.jsonl")],
                batch_size=32,
                workers=2,
            )
            whole = tally.chunks / (time.perf_counter() - started)
        assert tally.chunks == len(texts) and not tally.failures
        # The CPU's speed drifts over minutes: (a) is the mean of runs before and after (b).
        alone = (before + await embedder_alone()) / 2

        print(f"dataset {dataset.name}: {len(records)} documents, {len(texts)} chunks")
        print(f"(a) the embedder alone          {alone:8.2f} chunks/s   ({embedder.model_name})")
        ratio = whole / alone
        print(f"(b) whole ingest path           {whole:8.2f} chunks/s   (b)/(a) = {ratio:.3f}")

        # (c) precomputed vectors through Cari's writer (binary COPY, one transaction per 500
        # documents), HNSW maintained row by row vs deferred (--bulk), against a raw COPY.
        rows_data = synthetic_rows(rows)
        raw = await raw_copy(pool, settings, rows_data)
        print(f"(c) raw COPY, no HNSW index     {raw:8.0f} rows/s   (baseline)")
        quarter = (rows_data[0][: rows // 4], rows_data[1][: rows // 4])
        incremental, _, _ = await writer(pool, settings, "incremental", quarter, False)
        print(
            f"    writer, HNSW maintained     {incremental:8.0f} rows/s   "
            f"/raw = {incremental / raw:.3f}   ({rows // 4} rows)"
        )
        bulk, load, build = await writer(pool, settings, "bulk", rows_data, True)
        print(f"    writer, --bulk: load        {load:8.0f} rows/s   /raw = {load / raw:.3f}")
        async with pool.connection() as conn:
            cur = await conn.execute("SELECT count(*) FROM chunks")
            total = (await cur.fetchone() or [0])[0]
        print(f"      then HNSW build of {total} rows: {build:.1f} s")
        print(f"      load + build               {bulk:8.0f} rows/s   /raw = {bulk / raw:.3f}")


Rows = tuple[list[str], np.ndarray]


def synthetic_rows(count: int) -> Rows:
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((count, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    words = [
        "harga",
        "mobil",
        "honda",
        "civic",
        "toyota",
        "avanza",
        "cicilan",
        "tenor",
        "bunga",
        "kredit",
    ]
    return [" ".join(rng.choice(words, 60)) for _ in range(count)], vectors


async def raw_copy(pool: AsyncConnectionPool, settings: Settings, rows: Rows) -> float:
    """One COPY of every row into chunks with the HNSW index dropped (rolled back after)."""
    texts, vectors = rows
    async with pool.connection() as conn:
        await conn.execute("INSERT INTO collections (name) VALUES ('raw')")
        raw = await store.collection_ref(conn, "raw")
        cur = await conn.execute(
            "INSERT INTO documents (collection_id, external_id, content_hash) "
            "VALUES (%s, 'raw', '') RETURNING id",
            (raw.id,),
        )
        row = await cur.fetchone()
        assert row is not None
        await conn.commit()
        async with conn.transaction(force_rollback=True):
            await conn.execute(
                vector_index_drop_statement(space(settings.embedding_dimension, settings))
            )
            started = time.perf_counter()
            async with conn.cursor().copy(query("chunks_copy")) as copy:
                copy.set_types(store.CHUNK_COLUMN_TYPES)
                for i, text in enumerate(texts):
                    await copy.write_row(
                        (raw.id, row[0], i, "", text, Jsonb({}), raw.language, 60, vectors[i])
                    )
            return len(texts) / (time.perf_counter() - started)


async def writer(
    pool: AsyncConnectionPool, settings: Settings, name: str, rows: Rows, bulk: bool
) -> tuple[float, float, float]:
    """Rows per second through store.write_documents: 4 chunks a document, 500 a batch."""
    texts, vectors = rows
    async with pool.connection() as conn:
        await conn.execute("INSERT INTO collections (name) VALUES (%s)", (name,))
        collection = await store.collection_ref(conn, name)
    per_document, per_transaction = 4, 500
    started = time.perf_counter()
    async with pool.connection() as conn:
        if bulk:  # as `cari ingest --bulk`: drop in its own transaction, build in another
            await conn.execute(
                vector_index_drop_statement(space(settings.embedding_dimension, settings))
            )
            await conn.commit()
        step = per_document * per_transaction
        for start in range(0, len(texts), step):
            batch = []
            for first in range(start, min(start + step, len(texts)), per_document):
                span = range(first, min(first + per_document, len(texts)))
                document = store.NewDocument(f"d{first}", "", [Section(texts[first])], {}, None)
                pieces = [NewChunk(i - first, "", texts[i], 60, {}) for i in span]
                batch.append(store.PreparedDocument(document, pieces, [vectors[i] for i in span]))
            await store.write_documents(conn, collection, batch)
        loaded = time.perf_counter()
        if bulk:
            async with conn.transaction():
                await conn.execute(vector_indexes_statement(settings))
    built = time.perf_counter()
    return len(texts) / (built - started), len(texts) / (loaded - started), built - loaded


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--documents", type=int, default=150)
    parser.add_argument("--rows", type=int, default=20_000)
    args = parser.parse_args()
    asyncio.run(run(args.dataset, args.documents, args.rows))


if __name__ == "__main__":
    main()
