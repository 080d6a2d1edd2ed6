"""`bm25_fold` as one revision's migration defines it against another's, on the same postings.

    python -m bench.fold [--chunks 10000] [--corpus pessimistic] [--base 0018] [--rounds 2]
                         [--language english] [--seed 1]

A fold moves a collection's delta (the chunks written since the last fold) into packed blocks.
This measures two versions of the function side by side: `--base`'s (the `FOLD` of that
migration) and the head's (the newest migration that defines `FOLD`).

- **database**: `cari_bench_fold` on DATABASE_URL's server (without one, a throwaway embedded
  server), fresh and migrated, with the extension. `bench.keyword`'s corpus `--corpus` of
  `--chunks` chunks is loaded into its collection and folded (`pessimistic`: real passages, ~87
  postings a chunk; `zipf`: pseudo-words, ~163 postings a chunk and far more lexemes, where
  0018's second fold of 5,000 chunks ran for over 10 minutes before it was cancelled), and
  `bm25_blocks` is analysed: the planner's statistics know that collection's blocks only, as in
  a database where collections are created after the last ANALYZE.
- **each fold**, in a transaction rolled back, so every round starts from the same database:
  the version's function (`CREATE OR REPLACE`); each fold timed with the statistics compaction
  before it, as a write folds (`bench.keyword.fold`); a new collection holding copies of 80 % of the
  documents (their chunks in the delta), folded into no blocks (**new**); then copies of the
  other 20 %, every 7th chunk deleted and every 11th retitled (re-indexed), folded into the
  blocks of the first (**into blocks**). Rounds alternate which version goes first.
- **the same postings**: a digest of the blocks' unpacked postings, chunk ids taken relative to
  the collection's first, must be equal for both versions and every round, or the run fails.

Prints each fold's seconds per version and round (with the blocks' count), the head's over the
base's, and whether the postings were the same.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
from typing import Any

import psycopg
from pgvector.psycopg import register_vector_async

from bench import harness, keyword
from cari.db.migrations import ALEMBIC_DIR, earlier_revision
from cari.settings import load_settings

DATABASE = "cari_bench_fold"
COPIED = "fold"  # the new collection's name

# Copies of the source collection's documents whose ids fall in [lo, hi) of its document ids in
# order, into the collection `c`, chunks and all: the chunks land in the delta, their ids in
# the source's order (the digests compare ids relative to the first).
COPY = """
WITH picked AS (
    SELECT d.id, d.title, d.content_hash,
           row_number() OVER (ORDER BY d.id) - 1 AS n
    FROM documents AS d WHERE d.collection_id = %(source)s
), made AS (
    INSERT INTO documents (collection_id, external_id, title, content_hash)
    SELECT %(c)s, 'copy-' || p.id, p.title, p.content_hash
    FROM picked AS p WHERE p.n >= %(lo)s AND p.n < %(hi)s
    ORDER BY p.id
    RETURNING id, external_id
)
INSERT INTO chunks (collection_id, document_id, ordinal, title, content, language)
SELECT %(c)s, m.id, ch.ordinal, ch.title, ch.content, ch.language
FROM made AS m
JOIN chunks AS ch ON ch.document_id = substr(m.external_id, 6)::bigint
ORDER BY m.id, ch.ordinal  -- the ids in one order, whatever the plan
"""
# The blocks' count, and a digest of their unpacked postings, chunk ids relative to `base`. Not
# of the blocks' bounds: a row is cut at a payload size, and its first chunk id is stored whole,
# so where the copies' ids cross a varint width (16,384) the same postings are cut elsewhere.
DIGEST = """
SELECT count(DISTINCT (b.lexeme, b.last_chunk)),
       md5(string_agg(
           concat_ws(':', b.lexeme, u.chunk_id - %(base)s,
                     u.tf_title, u.tf_body, u.len_title, u.len_body),
           ';' ORDER BY b.lexeme COLLATE "C", u.chunk_id))
FROM bm25_blocks AS b CROSS JOIN LATERAL bm25_unpack(b.data) AS u
WHERE b.collection_id = %(c)s
"""


def head_revision() -> str:
    """The newest migration that defines `FOLD`."""
    for path in sorted((ALEMBIC_DIR / "versions").glob("*.py"), reverse=True):
        if "\nFOLD = " in path.read_text():
            return path.name.split("_", 1)[0]
    raise RuntimeError("no migration defines FOLD")


async def one_round(
    dsn: str, function: str, source: int, documents: int, language: str
) -> tuple[float, float, tuple[Any, ...], tuple[Any, ...]]:
    """Both folds with `function` (a CREATE OR REPLACE), rolled back: their seconds and the
    digests of the blocks after each."""
    first = documents * 4 // 5
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        await register_vector_async(conn)
        try:
            await conn.execute(function)
            cur = await conn.execute(
                "INSERT INTO collections (name, language) VALUES (%s, %s) RETURNING id",
                (COPIED, language),
            )
            c = ((await cur.fetchone()) or (0,))[0]
            await conn.execute(COPY, {"source": source, "c": c, "lo": 0, "hi": first})
            cur = await conn.execute("SELECT min(id) FROM chunks WHERE collection_id = %s", (c,))
            base = ((await cur.fetchone()) or (0,))[0]
            new = await keyword.fold(conn, c)
            new_digest = await (await conn.execute(DIGEST, {"c": c, "base": base})).fetchone()
            await conn.execute(COPY, {"source": source, "c": c, "lo": first, "hi": documents})
            changed = {"c": c, "base": base}
            await conn.execute(
                "DELETE FROM chunks WHERE collection_id = %(c)s AND (id - %(base)s) %% 7 = 0",
                changed,
            )
            await conn.execute(
                "UPDATE chunks SET title = title || ' revised'"
                " WHERE collection_id = %(c)s AND (id - %(base)s) %% 11 = 0",
                changed,
            )
            into = await keyword.fold(conn, c)
            into_digest = await (await conn.execute(DIGEST, changed)).fetchone()
        finally:
            await conn.rollback()
    assert new_digest is not None and into_digest is not None
    return new, into, tuple(new_digest), tuple(into_digest)


async def prepare(
    dsn: str, corpus_name: str, chunks: int, language: str, seed: int
) -> tuple[int, int]:
    """The source collection, loaded, folded and analysed: its id and document count."""
    corpus = keyword.build_corpus(corpus_name, chunks, 1, seed)
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await register_vector_async(conn)
        source, _, _ = await keyword.load(conn, corpus, language, load_baseline=False, fold_every=0)
        await keyword.fold(conn, source)
        await conn.execute("ANALYZE bm25_blocks")
        cur = await conn.execute(
            "SELECT count(*) FROM documents WHERE collection_id = %s", (source,)
        )
        return source, int(((await cur.fetchone()) or (0,))[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--corpus", default="pessimistic", choices=keyword.CORPORA)
    parser.add_argument("--base", default="0018", help="the migration whose FOLD is the base")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--language", default="english")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    settings = load_settings()
    head = head_revision()
    functions = {args.base: earlier_revision(args.base).FOLD, head: earlier_revision(head).FOLD}
    dsn = harness.fresh_database(DATABASE, settings)
    source, documents = asyncio.run(
        prepare(dsn, args.corpus, args.chunks, args.language, args.seed)
    )
    print(
        f"{args.chunks:,} {args.corpus} chunks ({documents:,} documents, {args.language}) folded"
        f" and analysed; each round copies them into a new collection; load average"
        f" {os.getloadavg()[0]:.2f}"
    )
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in functions}
    digests: dict[str, set[tuple[Any, ...]]] = {name: set() for name in functions}
    for r in range(args.rounds):
        order = list(functions) if r % 2 == 0 else list(reversed(functions))
        for name in order:
            new, into, d1, d2 = asyncio.run(
                one_round(dsn, functions[name], source, documents, args.language)
            )
            times[name].append((new, into))
            digests[name].add((d1[1], d2[1]))  # the postings, not the blocks
            print(
                f"round {r + 1}, {name}: fold new {new:.2f} s, into blocks {into:.2f} s;"
                f" blocks {d1[0]:,} / {d2[0]:,}",
                flush=True,
            )
    print(f"load average {os.getloadavg()[0]:.2f}")
    base_new, base_into = (statistics.mean(t[i] for t in times[args.base]) for i in (0, 1))
    head_new, head_into = (statistics.mean(t[i] for t in times[head]) for i in (0, 1))
    print(
        f"mean of {args.rounds} rounds: new {base_new:.2f} → {head_new:.2f} s"
        f" ({head_new / base_new:.2f}x), into blocks {base_into:.2f} → {head_into:.2f} s"
        f" ({head_into / base_into:.2f}x)"
    )
    same = digests[args.base] == digests[head] and len(digests[head]) == 1
    print("the same postings from both:", "yes" if same else f"NO: {digests}")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
