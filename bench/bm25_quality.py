"""Keyword relevance: Cari's BM25 against `ts_rank_cd` and a reference BM25 library, same run.

    python -m bench.bm25_quality [--dataset DIR ...] [--split test] [--title-boost 1 2 ...]
                                 [--k3 0 1000 ...]

For each BEIR-format dataset (default: every folder of ../shared/eval/datasets that has the
split), in a fresh database:

- Corpus: each record becomes one document (title; text, or the title when it has none), cut by
  Cari's own chunker and stored through `store.write_documents` without vectors: keyword search
  needs none, so no embedding model runs. The collection's language is `indonesian` for TyDi,
  else `english`.
- Keyword rankers, each returning its best 100 chunks for every judged query:
  - `cari bm25 (boost B, k3 K)`: Cari's keyword retriever (`cari.search.bm25`, top 100), with
    the collection's title boost and query-term saturation `bm25_k3` set to each `--title-boost`
    and each `--k3` in turn (k3 0: a word the query repeats counts once; 1000: about as often as
    it is said), then at the last of each once more with the query stop words set aside
    (`query_stopwords` emptied for that pass). It runs on the database's keyword engine: with
    the `cari_bm25` extension the load ends with a fold (as a bulk load does) and the extension
    reads the packed blocks; then, as the same-run baseline, the blocks are unfolded into rows
    and the last boost and k3 run once more on the SQL statement (`..., sql engine on the
    rows`), whose figures must equal the extension's;
  - `ts_rank_cd AND`: the tutorial's keyword branch, `websearch_to_tsquery` (every word
    required) ranked by `ts_rank_cd`;
  - `ts_rank_cd OR`: the same with the query's lexemes OR-ed;
  - `bm25s (pg tokens, once)` and `bm25s (pg tokens, repeats)`: the `bm25s` library on exactly
    the tokens PostgreSQL makes of each chunk's title and text, and of each query as Cari's
    keyword search analyses it (stop words dropped; `bench.reference`), a query word counted
    once, or once per occurrence as bm25s does by itself: the same scoring done elsewhere, so
    they should match `cari bm25 (boost 1, k3 0)` and `(boost 1, k3 1000)` up to ties;
  - `bm25s (own tokens, repeats)`: `bm25s` as it comes, with its own tokenizer, Snowball
    stemmer and stop words, a repeated query word counted each time: the reference a user of
    that library gets.
- Chunks become their documents at their best rank; nDCG@10, Recall@10, MRR@10 and
  Recall@100 come from `pytrec_eval` (`bench.quality.evaluate`). Per-query latency is reported
  for the in-database rankers.

Runs on DATABASE_URL if set, else on a throwaway embedded server.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from bench import harness
from bench.harness import (
    Qrels,
    Ranking,
    corpus_records,
    datasets_with,
    default_language,
    dsn_of,
    fresh_runtime,
    load_qrels,
    load_queries,
)
from bench.quality import TS_RANK_AND, TS_RANK_OR, document_ranking, evaluate, mean_metrics
from bench.reference import ReferenceBM25, analyzed_tokens, native_tokens, query_terms
from cari import collection
from cari.db.queries import query
from cari.ingest import store
from cari.ingest.formats import Section
from cari.ingest.pipeline import chunk
from cari.runtime import Runtime
from cari.schema.collections import CollectionCreate, CollectionUpdate
from cari.search import bm25
from cari.settings import Settings, load_settings

DEPTH = 100
BATCH = 500
METRICS = ("nDCG@10", "Recall@10", "MRR@10", f"Recall@{DEPTH}")


async def load(
    rt: Runtime, dataset: Path, language: str
) -> tuple[store.CollectionRef, dict[int, str], list[str]]:
    """The collection, chunk id -> document id, and each chunk's indexed text by chunk id order."""
    counter, settings = rt.embedder.count_tokens, rt.settings
    async with rt.pool.connection() as conn:
        await collection.create(conn, CollectionCreate(name="keyword", language=language), settings)
        ref = await store.collection_ref(conn, "keyword")
        batch: list[store.PreparedDocument] = []
        for record in corpus_records(dataset):
            text = record["text"] if record["text"].strip() else record["title"]
            if not text.strip():
                continue
            document = store.NewDocument(record["id"], record["title"], [Section(text)], {}, None)
            batch.append(store.PreparedDocument(document, chunk(document, counter, settings), None))
            if len(batch) == BATCH:
                await store.write_documents(conn, ref, batch)
                batch.clear()
        if batch:
            await store.write_documents(conn, ref, batch)
        # As a bulk load ends: the rest of the delta packed into blocks (the extension only).
        await store.compact_statistics(conn, ref, fold_postings=1)
        await conn.execute("VACUUM (ANALYZE) chunks, postings, bm25_blocks")
        cur = await conn.execute(
            "SELECT c.id, d.external_id, c.title || ' ' || c.content FROM chunks c "
            "JOIN documents d ON d.id = c.document_id ORDER BY c.id"
        )
        rows = await cur.fetchall()
    return ref, {int(r[0]): str(r[1]) for r in rows}, [str(r[2]) for r in rows]


ChunkIds = Callable[[psycopg.AsyncConnection[Any], str], Awaitable[list[int]]]


async def timed_ranking(
    pool: AsyncConnectionPool, ranker: ChunkIds, queries: dict[str, str], documents: dict[int, str]
) -> tuple[Ranking, list[float]]:
    """Each query's documents as `ranker` ranks its chunks, and the milliseconds it took."""
    ranking: Ranking = {}
    took = []
    async with pool.connection() as conn:
        for qid, text in queries.items():
            started = time.perf_counter()
            chunk_ids = await ranker(conn, text)
            took.append((time.perf_counter() - started) * 1000)
            ranking[qid] = document_ranking([documents[c] for c in chunk_ids])
    return ranking, took


def sql_ranker(statement: str, params: dict[str, Any]) -> ChunkIds:
    async def rank(conn: psycopg.AsyncConnection[Any], text: str) -> list[int]:
        cur = await conn.execute(statement, {**params, "query": text, "depth": DEPTH})
        return [int(r[0]) for r in await cur.fetchall()]

    return rank


def cari_ranker(ref: store.CollectionRef, engine: bm25.Engine) -> ChunkIds:
    async def rank(conn: psycopg.AsyncConnection[Any], text: str) -> list[int]:
        found = await bm25.search(
            conn, ref.id, text, candidates=DEPTH, filters=sql.SQL(""), params={}, engine=engine
        )
        return [c.chunk_id for c in found.candidates]

    return rank


def library_ranking(
    corpus: Sequence[Sequence[str]],
    query_tokens: dict[str, list[str]],
    chunk_ids: Sequence[int],
    documents: dict[int, str],
    *,
    repeats: bool,
) -> Ranking:
    """bm25s's ranking, a query token given twice counted twice, or (not `repeats`) once."""
    reference = ReferenceBM25(corpus)
    return {
        qid: document_ranking(
            [
                documents[chunk_ids[i]]
                for i, _ in reference.search(tokens if repeats else sorted(set(tokens)), DEPTH)
            ]
        )
        for qid, tokens in query_tokens.items()
    }


async def run_dataset(
    settings: Settings, dataset: Path, split: str, boosts: Sequence[float], k3s: Sequence[float]
) -> dict[str, Any]:
    language = default_language(dataset)
    queries_all = load_queries(dataset)
    qrels_all = load_qrels(dataset, split)
    queries = {q: t for q, t in queries_all.items() if q in qrels_all}
    qrels: Qrels = {q: qrels_all[q] for q in queries}
    async with fresh_runtime("cari_bench_bm25", settings) as rt:
        ref, documents, texts = await load(rt, dataset, language)
        rankings, latency = await cari_rankings(rt, ref, language, queries, documents, boosts, k3s)
        dsn = dsn_of(rt.pool)
    rankings |= library_rankings(dsn, language, texts, queries, documents)
    return {
        "dataset": dataset.name,
        "split": split,
        "language": language,
        "chunks": len(texts),
        "queries": len(queries),
        "metrics": {
            name: mean_metrics(evaluate(qrels, ranking, DEPTH))
            for name, ranking in rankings.items()
        },
        "latency_ms": {
            name: {
                "p50": statistics.median(values),
                "p95": statistics.quantiles(values, n=20)[-1],
            }
            for name, values in latency.items()
        },
    }


async def cari_rankings(
    rt: Runtime,
    ref: store.CollectionRef,
    language: str,
    queries: dict[str, str],
    documents: dict[int, str],
    boosts: Sequence[float],
    k3s: Sequence[float],
) -> tuple[dict[str, Ranking], dict[str, list[float]]]:
    """Cari's BM25 at each title boost and k3, without query stop words, on the SQL engine
    (where the extension serves) and the two `ts_rank_cd` statements: rankings and latencies."""
    pool = rt.pool
    rankings: dict[str, Ranking] = {}
    latency: dict[str, list[float]] = {}
    engine = (await rt.keyword_engine.current()).name
    for boost in boosts:
        for k3 in k3s:
            async with pool.connection() as conn:
                await collection.update(
                    conn, "keyword", CollectionUpdate(title_boost=boost, bm25_k3=k3)
                )
            name = f"cari bm25 (boost {boost:g}, k3 {k3:g})"
            rankings[name], latency[name] = await timed_ranking(
                pool, cari_ranker(ref, engine), queries, documents
            )
    # The same BM25 without query stop words: the rows are set aside for one pass (this
    # database is the run's own) and put back.
    async with pool.connection() as conn:
        cur = await conn.execute("DELETE FROM query_stopwords RETURNING language, lexeme")
        stop_rows = await cur.fetchall()
    name = f"cari bm25 (boost {boosts[-1]:g}, k3 {k3s[-1]:g}, no query stop words)"
    rankings[name], latency[name] = await timed_ranking(
        pool, cari_ranker(ref, engine), queries, documents
    )
    async with pool.connection() as conn, conn.cursor() as cur:
        await cur.executemany("INSERT INTO query_stopwords VALUES (%s, %s)", stop_rows)
    if engine != "sql":
        # The same-run baseline: the blocks unfolded into rows, the SQL statement on them.
        async with pool.connection() as conn:
            await conn.execute(query("bm25_unfold"))
            await conn.execute("VACUUM (ANALYZE) postings, bm25_blocks")
        boost, k3 = boosts[-1], k3s[-1]
        name = f"cari bm25 (boost {boost:g}, k3 {k3:g}), sql engine on the rows"
        rankings[name], latency[name] = await timed_ranking(
            pool, cari_ranker(ref, "sql"), queries, documents
        )
    params = {"collection_id": ref.id, "language": language}
    for name, statement in (("ts_rank_cd AND", TS_RANK_AND), ("ts_rank_cd OR", TS_RANK_OR)):
        rankings[name], latency[name] = await timed_ranking(
            pool, sql_ranker(statement, params), queries, documents
        )
    return rankings, latency


def library_rankings(
    dsn: str, language: str, texts: list[str], queries: dict[str, str], documents: dict[int, str]
) -> dict[str, Ranking]:
    """The bm25s library's rankings, on PostgreSQL's tokens (query words once, and repeated)
    and on its own tokenizer's."""
    chunk_ids = sorted(documents)
    with psycopg.connect(dsn) as sync_conn:
        corpus = analyzed_tokens(sync_conn, language, texts)
        terms = query_terms(sync_conn, language, list(queries.values()))
    analyzed = dict(zip(queries, terms, strict=True))
    rankings: dict[str, Ranking] = {}
    for repeats in (False, True):
        rankings[f"bm25s (pg tokens, {'repeats' if repeats else 'once'})"] = library_ranking(
            corpus, analyzed, chunk_ids, documents, repeats=repeats
        )
    own = native_tokens(language, list(queries.values()))
    rankings["bm25s (own tokens, repeats)"] = library_ranking(
        native_tokens(language, texts),
        dict(zip(queries, own, strict=True)),
        chunk_ids,
        documents,
        repeats=True,
    )
    return rankings


def report(result: dict[str, Any]) -> str:
    lines = [
        f"{result['dataset']} ({result['split']}, {result['language']}): {result['chunks']:,} "
        f"chunks, {result['queries']} queries",
        f"  {'ranker':<42}" + "".join(f"{m:>12}" for m in METRICS) + f"{'p50 ms':>9}{'p95 ms':>9}",
    ]
    for name, values in result["metrics"].items():
        timing = result["latency_ms"].get(name)
        lines.append(
            f"  {name:<42}"
            + "".join(f"{values[m]:>12.4f}" for m in METRICS)
            + (f"{timing['p50']:>9.1f}{timing['p95']:>9.1f}" if timing else "")
        )
    return "\n".join(lines)


async def main_async(args: argparse.Namespace) -> None:
    settings = load_settings()
    folders = args.dataset or datasets_with(args.split)
    for folder in folders:
        started = time.perf_counter()
        result = await run_dataset(settings, Path(folder), args.split, args.title_boost, args.k3)
        print(report(result))
        print(f"  ({time.perf_counter() - started:.0f} s)\n", flush=True)


def main() -> None:
    parser = harness.parser(__doc__)
    harness.dataset_options(parser)
    parser.add_argument(
        "--title-boost",
        type=float,
        nargs="+",
        default=[1.0, 3.0],
        help="title boosts to run Cari's BM25 with (default: 1, the reference's scoring, and 3, "
        "the collection default)",
    )
    parser.add_argument(
        "--k3",
        type=float,
        nargs="+",
        default=[0.0, 1000.0],
        help="query-term saturations to run Cari's BM25 with (default: 0, each query word once, "
        "and 1000, the collection default: repeats count almost linearly)",
    )
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
