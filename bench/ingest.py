"""Ingestion throughput, measured against baselines in the same run.

    python -m bench.ingest [--dataset DIR] [--documents N] [--rows N]

(a) the local embedder alone on the chunk texts of N documents of a BEIR-format dataset;
(b) the whole `cari ingest` path on the same documents (read JSON Lines, hash check, chunk,
    embed, binary COPY in one transaction per batch) — (b)/(a) is the ingest overhead;
(c) chunk rows per second through Cari's writer with precomputed 384-d vectors, against one
    raw binary COPY of the same rows into the same table (both keep the GIN and HNSW indexes).

Runs on DATABASE_URL if set, else on a throwaway embedded server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from cari import db, embedded, migrations
from cari.embed import LocalEmbedder
from cari.ingest import store
from cari.ingest.bulk import ingest_sources
from cari.ingest.chunking import Chunk
from cari.ingest.files import Source
from cari.ingest.formats import Section
from cari.ingest.pipeline import Ingestor, chunk
from cari.queries import query
from cari.settings import load_settings

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATASET = ROOT.parent / "shared" / "eval" / "datasets" / "cisi"


def fresh_database(server_dsn: str, name: str) -> str:
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return psycopg.conninfo.make_conninfo(server_dsn, dbname=name)


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
    settings = load_settings(reembed_interval_s=0)
    server = settings.database_url or embedded.start(Path(tempfile.mkdtemp(prefix="cari-bench-")))
    dsn = fresh_database(server, "cari_bench_ingest")
    migrations.upgrade(dsn, settings)
    pool = db.make_pool(dsn, settings)
    await pool.open(wait=True)
    embedder = LocalEmbedder.from_settings(settings)
    records = load_records(dataset, documents)

    # (a) the embedder alone, on exactly the texts the ingest path will embed
    chunks: list[Chunk] = []
    for r in records:
        document = store.NewDocument(r["id"], r["title"], [Section(r["text"])], {}, None)
        chunks += chunk(document, embedder.count_tokens, settings)
    texts = [store.embedding_text(c.title, c.content) for c in chunks]
    await embedder.embed_documents(texts[:4])  # warm the model
    started = time.perf_counter()
    await embedder.embed_documents(texts)
    alone = len(texts) / (time.perf_counter() - started)

    # (b) the whole path, from a JSON Lines file
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "corpus.jsonl"
        path.write_text("\n".join(json.dumps(r) for r in records))
        async with pool.connection() as conn:
            await conn.execute("INSERT INTO collections (name) VALUES ('bench')")
        started = time.perf_counter()
        tally = await ingest_sources(
            Ingestor(pool, embedder, settings),
            "bench",
            [Source(path, "corpus.jsonl")],
            batch_size=32,
            workers=2,
        )
        whole = tally.chunks / (time.perf_counter() - started)
    assert tally.chunks == len(texts) and not tally.failures

    # (c) precomputed vectors: Cari's writer vs one raw COPY of the same rows
    copy_rows, raw_rows = await write_rows(pool, rows)

    print(f"dataset {dataset.name}: {len(records)} documents, {len(texts)} chunks")
    print(f"(a) local embedder alone      {alone:8.2f} chunks/s")
    print(f"(b) whole ingest path         {whole:8.2f} chunks/s   (b)/(a) = {whole / alone:.3f}")
    print(f"(c) writer, precomputed 384-d {copy_rows:8.0f} rows/s")
    print(
        f"    raw COPY, same rows       {raw_rows:8.0f} rows/s"
        f"   writer/raw = {copy_rows / raw_rows:.3f}"
    )
    await pool.close()


async def write_rows(pool: AsyncConnectionPool, count: int) -> tuple[float, float]:
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
    texts = [" ".join(rng.choice(words, 60)) for _ in range(count)]
    async with pool.connection() as conn:
        await conn.execute("INSERT INTO collections (name) VALUES ('rows'), ('raw')")
        collection = await store.collection_ref(conn, "rows")
        raw = await store.collection_ref(conn, "raw")

    per_document = 4
    started = time.perf_counter()
    async with pool.connection() as conn:
        for start in range(0, count, 500 * per_document):
            async with conn.transaction():
                for first in range(start, min(start + 500 * per_document, count), per_document):
                    span = range(first, min(first + per_document, count))
                    document = store.NewDocument(f"d{first}", "", [Section(texts[first])], {}, None)
                    pieces = [Chunk(i - first, "", texts[i], 60, {}) for i in span]
                    await store.write_document(
                        conn, collection, document, pieces, [vectors[i] for i in span]
                    )
    writer = count / (time.perf_counter() - started)

    started = time.perf_counter()
    async with pool.connection() as conn, conn.transaction():
        cur = await conn.execute(
            "INSERT INTO documents (collection_id, external_id, content_hash) "
            "VALUES (%s, 'raw', '') RETURNING id",
            (raw.id,),
        )
        row = await cur.fetchone()
        assert row is not None
        async with conn.cursor().copy(query("chunks_copy")) as copy:
            copy.set_types(store.CHUNK_COLUMN_TYPES)
            for i in range(count):
                await copy.write_row(
                    (raw.id, row[0], i, "", texts[i], Jsonb({}), raw.language, 60, vectors[i])
                )
    raw_rate = count / (time.perf_counter() - started)
    return writer, raw_rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--documents", type=int, default=150)
    parser.add_argument("--rows", type=int, default=20_000)
    args = parser.parse_args()
    asyncio.run(run(args.dataset, args.documents, args.rows))


if __name__ == "__main__":
    main()
