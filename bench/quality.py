"""Retrieval quality on a BEIR-format dataset: nDCG@10, Recall@10, MRR@10 and Recall@50.

    python -m bench.quality --dataset DIR [--split test] [--language english|indonesian|simple]
                            [--limit-queries N] [--top-k 50]

- Corpus: every record of `corpus.jsonl` becomes one document (`external_id` = `_id`, its
  `title`, one section with its `text`, no metadata) ingested through the real path,
  `Ingestor.ingest`, in batches of 64: chunked, embedded, written by binary COPY. A record
  with no text but a title (many CACM records) is its title; one with neither is skipped and
  counted. The collection's text-search language is `english`, or
  `indonesian` when the folder's name contains "tydi" (`--language` overrides).
- Embeddings: the configured embedder (the local model unless `CARI_EMBEDDER` says otherwise),
  behind the on-disk cache of `bench/embedding_cache.py`: a rerun embeds nothing.
- Queries: those of `queries.jsonl` with judgements in `qrels/<split>.tsv`, in file order (the
  first `--limit-queries`), each run through `Searcher.search` in keyword, vector and hybrid
  mode with `top_k` 50 (the API's maximum) and `candidates` 100, one request at a time.
- Results are chunks: each becomes its document, which keeps its best (first) rank, since the
  judgements are per document.
- Metrics: computed by `pytrec_eval` (trec_eval's definitions; nDCG with linear gains, as BEIR
  reports it) per query, then averaged over every evaluated query, a query with no results
  counting 0. nDCG@10, Recall@10 and Recall@50 on the ranked documents; MRR@10 is `recip_rank`
  on the run cut to its first 10 documents.
- Recall@50, not Recall@100: the search API returns at most 50 results (`top_k` <= 50) and the
  retrievers' deeper candidate lists are internal to the engine, so depth 100 is out of reach
  through the public API. `--top-k` below 50 lowers the depth; above 50 it is capped.

Runs on DATABASE_URL if set (in a fresh database `cari_bench_quality`), else on a throwaway
embedded server in a temporary folder. The core, `run_quality`, takes an open pool, the settings,
the dataset folder and an embedder, and returns the figures as a dict (the tests call it).
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytrec_eval
from psycopg_pool import AsyncConnectionPool

from bench.database import fresh_pool
from bench.embedding_cache import CachingEmbedder
from cari import collection
from cari.embed import Embedder, make_embedder
from cari.ingest.formats import Section
from cari.ingest.pipeline import Ingestor
from cari.ingest.store import NewDocument
from cari.search.engine import Mode, Searcher, SearchRequest
from cari.settings import Settings, load_settings

MODES: tuple[Mode, ...] = ("keyword", "vector", "hybrid")
MAX_TOP_K = 50  # SearchRequest.top_k's bound
CANDIDATES = 100
INGEST_BATCH = 64
DATABASE = "cari_bench_quality"

Qrels = dict[str, dict[str, int]]
Ranking = dict[str, list[str]]  # query id -> document ids, best first


# -- the dataset --------------------------------------------------------------------------------


def default_language(dataset: Path) -> str:
    return "indonesian" if "tydi" in dataset.name.lower() else "english"


def load_queries(dataset: Path) -> dict[str, str]:
    """Query id -> text, in file order."""
    queries: dict[str, str] = {}
    with (dataset / "queries.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                row = json.loads(line)
                queries[str(row["_id"])] = str(row["text"])
    return queries


def load_qrels(dataset: Path, split: str) -> Qrels:
    """`qrels/<split>.tsv` (header `query-id corpus-id score`) as {query: {document: grade}}."""
    qrels: Qrels = {}
    with (dataset / "qrels" / f"{split}.tsv").open(encoding="utf-8", newline="") as lines:
        rows = csv.reader(lines, delimiter="\t")
        header = next(rows, None)
        if header is None or [h.strip() for h in header[:3]] != [
            "query-id",
            "corpus-id",
            "score",
        ]:
            raise ValueError(f"qrels/{split}.tsv: expected the header 'query-id corpus-id score'")
        for row in rows:
            if row:
                qrels.setdefault(row[0].strip(), {})[row[1].strip()] = int(float(row[2]))
    return qrels


def corpus_records(dataset: Path) -> Iterator[dict[str, str]]:
    with (dataset / "corpus.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                row = json.loads(line)
                yield {
                    "id": str(row["_id"]),
                    "title": str(row.get("title") or ""),
                    "text": str(row.get("text") or ""),
                }


# -- metrics ------------------------------------------------------------------------------------


def metric_names(depth: int) -> list[str]:
    return list(dict.fromkeys(["nDCG@10", "Recall@10", "MRR@10", f"Recall@{depth}"]))


def _pytrec_run(ranking: Ranking, cut: int) -> dict[str, dict[str, float]]:
    """Ranked lists as pytrec_eval scores: strictly decreasing, so its sort keeps our order."""
    return {
        qid: {doc: float(len(docs[:cut]) - i) for i, doc in enumerate(docs[:cut])}
        for qid, docs in ranking.items()
        if docs
    }


def evaluate(qrels: Qrels, ranking: Ranking, depth: int) -> dict[str, dict[str, float]]:
    """Per query of `qrels`: nDCG@10, Recall@10, Recall@depth and MRR@10, by pytrec_eval.

    `ranking` holds each query's documents, best first, at most `depth` of them counted. A query
    of `qrels` missing from `ranking` (or with nothing found) scores 0 everywhere.
    """
    if depth < 10:
        raise ValueError("depth must be at least 10")
    cutoffs = ",".join(str(c) for c in sorted({10, depth}))
    full = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", f"recall.{cutoffs}"})
    top10 = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"})
    scored = full.evaluate(_pytrec_run(ranking, depth))
    reciprocal = top10.evaluate(_pytrec_run(ranking, 10))
    names = metric_names(depth)
    per_query: dict[str, dict[str, float]] = {}
    for qid in qrels:
        values = scored.get(qid, {})
        per_query[qid] = dict.fromkeys(names, 0.0) | {
            "nDCG@10": float(values.get("ndcg_cut_10", 0.0)),
            "Recall@10": float(values.get("recall_10", 0.0)),
            f"Recall@{depth}": float(values.get(f"recall_{depth}", 0.0)),
            "MRR@10": float(reciprocal.get(qid, {}).get("recip_rank", 0.0)),
        }
    return per_query


def mean_metrics(per_query: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    if not per_query:
        return {}
    names = next(iter(per_query.values())).keys()
    return {n: sum(q[n] for q in per_query.values()) / len(per_query) for n in names}


def document_ranking(document_ids: Sequence[str]) -> list[str]:
    """Chunk results' documents, each at its best (first) rank."""
    return list(dict.fromkeys(document_ids))


# -- the run ------------------------------------------------------------------------------------


async def ingest_corpus(
    ingestor: Ingestor,
    collection_name: str,
    dataset: Path,
    progress: Callable[[str], None] | None = None,
) -> dict[str, int]:
    """Every record with text, in batches through the real ingest path; the counts."""
    counts = {"documents": 0, "chunks": 0, "skipped_empty": 0}
    seen: set[str] = set()
    batch: list[NewDocument] = []
    started = time.perf_counter()
    last_report = started

    async def flush() -> None:
        nonlocal last_report
        result = await ingestor.ingest(collection_name, batch)
        if result.warnings:
            raise RuntimeError(f"ingest degraded, figures would be wrong: {result.warnings[0]}")
        counts["documents"] += len(result.outcomes)
        counts["chunks"] += sum(o.chunks for o in result.outcomes)
        batch.clear()
        now = time.perf_counter()
        if progress is not None and now - last_report >= 30:
            last_report = now
            rate = counts["chunks"] / (now - started)
            progress(
                f"  ingest: {counts['documents']:,} documents, {counts['chunks']:,} chunks, "
                f"{now - started:.0f} s ({rate:.1f} chunks/s)"
            )

    for record in corpus_records(dataset):
        if record["id"] in seen:
            raise ValueError(f"corpus.jsonl: the _id {record['id']!r} appears twice")
        seen.add(record["id"])
        text = record["text"] if record["text"].strip() else record["title"]
        if not text.strip():
            counts["skipped_empty"] += 1
            continue
        batch.append(NewDocument(record["id"], record["title"], [Section(text)], {}, None))
        if len(batch) == INGEST_BATCH:
            await flush()
    if batch:
        await flush()
    return counts


async def run_quality(
    pool: AsyncConnectionPool,
    settings: Settings,
    dataset: Path,
    embedder: Embedder,
    *,
    split: str = "test",
    language: str | None = None,
    limit_queries: int | None = None,
    top_k: int = MAX_TOP_K,
    collection_name: str = "quality",
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Ingest `dataset` into a new collection on `pool`'s (migrated) database, run its judged
    queries in every mode and return the figures: counts, timings, per-mode mean and per-query
    metrics, the document rankings, and the embedding cache's hit rate (None without cache)."""
    began = time.perf_counter()
    depth = min(top_k, MAX_TOP_K)
    if depth < 10:
        raise ValueError("top_k must be at least 10 (the metrics look at the top 10)")
    language = language or default_language(dataset)
    queries = load_queries(dataset)
    qrels_all = load_qrels(dataset, split)
    judged = [qid for qid in queries if qid in qrels_all]
    if limit_queries is not None:
        judged = judged[:limit_queries]
    qrels = {qid: qrels_all[qid] for qid in judged}

    async with pool.connection() as conn:
        await collection.create(
            conn, collection.CollectionCreate(name=collection_name, language=language)
        )
    ingestor = Ingestor(pool, embedder, settings)
    counts = await ingest_corpus(ingestor, collection_name, dataset, progress)
    async with pool.connection() as conn:
        await conn.execute("ANALYZE chunks")  # the statistics autovacuum would leave
    ingested = time.perf_counter()
    if progress is not None:
        progress(
            f"  ingest done: {counts['documents']:,} documents, {counts['chunks']:,} chunks in "
            f"{ingested - began:.0f} s; searching {len(judged)} queries x {len(MODES)} modes"
        )

    searcher = Searcher(pool, embedder, settings)
    rankings: dict[str, Ranking] = {mode: {} for mode in MODES}
    search_s = dict.fromkeys(MODES, 0.0)
    for qid in judged:
        for mode in MODES:
            request = SearchRequest(
                query=queries[qid], mode=mode, top_k=depth, candidates=CANDIDATES
            )
            started = time.perf_counter()
            response = await searcher.search(collection_name, request)
            search_s[mode] += time.perf_counter() - started
            if response.degraded:
                raise RuntimeError(f"search degraded ({response.warnings}): figures would be wrong")
            rankings[mode][qid] = document_ranking([r.document_id for r in response.results])

    per_query = {mode: evaluate(qrels, rankings[mode], depth) for mode in MODES}
    stats = embedder.stats if isinstance(embedder, CachingEmbedder) else None
    return {
        "dataset": dataset.name,
        "split": split,
        "language": language,
        "model": embedder.model_name,
        "depth": depth,
        "candidates": CANDIDATES,
        "metrics": metric_names(depth),
        **counts,
        "queries": len(judged),
        "queries_judged": len(qrels_all),
        "queries_total": len(queries),
        "modes": {mode: mean_metrics(per_query[mode]) for mode in MODES},
        "per_query": per_query,
        "rankings": rankings,
        "no_results": {mode: sum(1 for d in rankings[mode].values() if not d) for mode in MODES},
        "mean_documents": {
            mode: sum(len(d) for d in rankings[mode].values()) / max(1, len(judged))
            for mode in MODES
        },
        "timings_s": {
            "ingest": ingested - began,
            **{f"search_{mode}": search_s[mode] for mode in MODES},
            "total": time.perf_counter() - began,
        },
        "cache": None
        if stats is None
        else {"hits": stats.hits, "misses": stats.misses, "hit_rate": stats.hit_rate},
    }


# -- the command --------------------------------------------------------------------------------


def report(result: dict[str, Any], cache_file: Path | None, top_k: int) -> str:
    depth = result["depth"]
    names = result["metrics"]
    lines = [
        f"dataset {result['dataset']} (split {result['split']}, language {result['language']}, "
        f"model {result['model']})",
        f"corpus: {result['documents']:,} documents ingested, {result['chunks']:,} chunks; "
        f"{result['skipped_empty']} skipped for having neither text nor title",
        f"queries: {result['queries']} evaluated ({result['queries_judged']} of "
        f"{result['queries_total']} have qrels in {result['split']})",
        f"search: Searcher.search, top_k {depth}, candidates {result['candidates']}, "
        "one request at a time; chunks -> documents at their best rank",
    ]
    if top_k > MAX_TOP_K:
        lines.append(f"  (--top-k {top_k} capped at {MAX_TOP_K}, the search API's maximum)")
    lines.append(
        f"  Recall@{depth}, not Recall@100: the API returns at most {MAX_TOP_K} results and the "
        "retrievers' deeper candidate lists are internal to the engine"
    )
    cache = result["cache"]
    if cache is not None:
        lines.append(
            f"embedding cache {cache_file}: {cache['hits']:,} hits, {cache['misses']:,} misses, "
            f"hit rate {cache['hit_rate']:.1%}"
        )
    lines.append("")
    header = f"{'mode':<8} " + " ".join(f"{n:>10}" for n in names)
    lines.append(header + f" {'no result':>10} {'docs/query':>11} {'search s':>9}")
    for mode in MODES:
        values = result["modes"][mode]
        lines.append(
            f"{mode:<8} "
            + " ".join(f"{values[n]:>10.4f}" for n in names)
            + f" {result['no_results'][mode]:>10} {result['mean_documents'][mode]:>11.1f}"
            + f" {result['timings_s'][f'search_{mode}']:>9.1f}"
        )
    timings = result["timings_s"]
    lines += [
        "",
        f"(no result: queries with no hit at all; docs/query: distinct documents in the top "
        f"{depth} chunks, the depth of Recall@{depth})",
        f"time: ingest {timings['ingest']:.1f} s (embedding included), search "
        f"{sum(timings[f'search_{m}'] for m in MODES):.1f} s, harness total "
        f"{timings['total']:.1f} s",
    ]
    return "\n".join(lines)


async def main_async(args: argparse.Namespace) -> None:
    began = time.perf_counter()
    settings = load_settings(reembed_interval_s=0, statement_timeout_ms=0)
    pool = await fresh_pool(DATABASE, settings)
    embedder = CachingEmbedder(make_embedder(settings))
    print(f"quality: {args.dataset} into a fresh database {DATABASE}", flush=True)
    try:
        result = await run_quality(
            pool,
            settings,
            args.dataset,
            embedder,
            split=args.split,
            language=args.language,
            limit_queries=args.limit_queries,
            top_k=args.top_k,
            progress=lambda line: print(line, flush=True),
        )
    finally:
        await pool.close()
        await embedder.aclose()
    print()
    print(report(result, embedder.path, args.top_k))
    print(f"total runtime {time.perf_counter() - began:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, required=True, help="a BEIR-format folder")
    parser.add_argument("--split", default="test", help="qrels/<split>.tsv (default: test)")
    parser.add_argument(
        "--language",
        choices=["english", "indonesian", "simple"],
        help="text-search language (default: english; indonesian for a folder named *tydi*)",
    )
    parser.add_argument("--limit-queries", type=int, help="only the first N judged queries")
    parser.add_argument(
        "--top-k",
        type=int,
        default=MAX_TOP_K,
        help=f"results per search, 10..{MAX_TOP_K} (more is capped at {MAX_TOP_K})",
    )
    args = parser.parse_args()
    if args.top_k < 10:
        parser.error("--top-k must be at least 10")
    if args.limit_queries is not None and args.limit_queries < 1:
        parser.error("--limit-queries must be at least 1")
    if not (args.dataset / "corpus.jsonl").is_file():
        parser.error(f"{args.dataset} has no corpus.jsonl")
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
