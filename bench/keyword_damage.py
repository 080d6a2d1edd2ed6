"""What a damaged keyword block costs: `cari bm25 check`'s reading of every block against its
recount, and a contained search (from the chunks' own words) against the walk.

    python -m bench.keyword_damage [--chunks 100000] [--rounds 2] [--seed 1]

- **database**: `cari_bench_keyword_damage` on DATABASE_URL's server (without one, a throwaway
  embedded server), fresh and migrated, with the extension. One collection (`simple`) of
  `--chunks` one-chunk documents of 20 to 120 words drawn from 5,000 words, P(rank r) ~ 1/r^1.07,
  written through the ingest path's writer without vectors, then folded into blocks.
- **check**: each round, `bm25_block_problems` over every block of the collection (what `cari
  bm25 check` reads first, each block alone) and the full recount from the chunks
  (`sql/bm25_check.sql`, what it did alone before).
- **search**: for words held by nearly every chunk, about half, ~2 %, ~0.1 %, and three of them
  at once, the best of `--rounds` + 1 runs of the walk (`search_keyword_blocks.sql`) and of the
  chunks' statement a search falls back to when the walk meets a damaged block
  (`search_keyword_chunks.sql`); both must return the same chunks with the same scores.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import time

import psycopg
from pgvector.psycopg import register_vector_async

from bench import harness
from cari import collection
from cari.db import keyword_damage
from cari.ingest.chunking import NewChunk
from cari.ingest.formats import Section
from cari.ingest.store import (
    NewDocument,
    PreparedDocument,
    collection_ref,
    compact_statistics,
    write_documents,
)
from cari.schema.collections import CollectionCreate
from cari.search import bm25
from cari.settings import load_settings

DATABASE = "cari_bench_keyword_damage"
VOCABULARY = 5_000
EXPONENT = 1.07
WORDS = (20, 120)
# Words by rank: in nearly every chunk, about half, ~2 %, ~0.1 % (at 70 words a chunk).
QUERIES = ("w0", "w10", "w300", "w4000", "w0 w10 w300")


def documents(count: int, seed: int) -> list[PreparedDocument]:
    rng = random.Random(seed)
    vocabulary = [f"w{i}" for i in range(VOCABULARY)]
    weights = [1 / (rank + 1) ** EXPONENT for rank in range(VOCABULARY)]
    made = []
    for i in range(count):
        text = " ".join(rng.choices(vocabulary, weights, k=rng.randint(*WORDS)))
        document = NewDocument(f"d{i}", "", [Section(text)], {}, None, None)
        made.append(PreparedDocument(document, [NewChunk(0, "", text, 0, {})], None))
    return made


async def measure(dsn: str, chunks: int, rounds: int, seed: int) -> None:
    """Load the collection into the migrated database `dsn` and print the figures."""
    settings = load_settings()
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await register_vector_async(conn)
        await collection.create(conn, CollectionCreate(name="damage", language="simple"), settings)
        ref = await collection_ref(conn, "damage")
        started = time.perf_counter()
        made = documents(chunks, seed)
        for start in range(0, len(made), 2_000):
            await write_documents(conn, ref, made[start : start + 2_000], compact=False)
        await compact_statistics(conn, ref, fold_postings=1)
        cur = await conn.execute(
            "SELECT count(*), sum(n) FROM bm25_blocks WHERE collection_id = %s", (ref.id,)
        )
        blocks, postings = (await cur.fetchone()) or (0, 0)
        print(
            f"{chunks:,} chunks loaded and folded in {time.perf_counter() - started:.0f} s:"
            f" {blocks:,} blocks, {postings:,} postings; load average {os.getloadavg()[0]:.2f}"
        )
        for r in range(rounds):
            began = time.perf_counter()
            damaged = await keyword_damage.find(conn, ref.id)
            read = time.perf_counter() - began
            began = time.perf_counter()
            differences = await collection.keyword_index_differences(conn, "damage")
            recount = time.perf_counter() - began
            assert not damaged and not any(differences.values()), (damaged, differences)
            print(
                f"check, round {r + 1}: every block read alone {read:.2f} s, the recount"
                f" {recount:.2f} s ({read / recount:.1%} of it)"
            )
        search = {"candidates": 100, "filters": bm25.NO_FILTERS, "params": {}}
        for words in QUERIES:
            best: dict[str, float] = {}
            found: dict[str, list[tuple[int, float]]] = {}
            for _ in range(rounds + 1):
                for statement in ("cari_bm25", "chunks"):
                    began = time.perf_counter()
                    result = await bm25.search(
                        conn,
                        ref.id,
                        words,
                        engine=statement,
                        **search,  # type: ignore[arg-type]
                    )
                    took = (time.perf_counter() - began) * 1000
                    best[statement] = min(best.get(statement, took), took)
                    found[statement] = [(c.chunk_id, round(c.score, 9)) for c in result.candidates]
            assert found["cari_bm25"] == found["chunks"], words
            print(
                f"search {words!r} ({result.postings_read:,} postings): walk"
                f" {best['cari_bm25']:.1f} ms, from the chunks {best['chunks']:.1f} ms"
                f" ({best['chunks'] / best['cari_bm25']:.1f}x); the same results"
            )
    print(f"load average {os.getloadavg()[0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    dsn = harness.fresh_database(DATABASE, load_settings())
    asyncio.run(measure(dsn, args.chunks, args.rounds, args.seed))


if __name__ == "__main__":
    main()
