"""Answers without an LLM: what the extractive answer costs over the search, and what it cites.

    python -m bench.answer [--dataset DIR] [--split test] [--queries 200]

One BEIR-format set (default: TyDi QA Indonesian) is ingested into a fresh database through the
real path (embeddings from `bench.quality`'s on-disk cache). For each judged question, one at a
time and alternating: `Searcher.search` with the collection's defaults (the baseline), and
`Answerer.prepare` + `Answerer.answer` on the same question (that search, then numbering,
extractive answer, citation filtering). Reported: p50 / p95 of both and their ratio; how often
the answer is "no information"; and how often the answer cites at least one document judged
relevant for the question (qrels), against how often the search's top k holds one.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from pathlib import Path

from bench import harness
from bench.embedding_cache import CachingEmbedder
from bench.harness import DATASETS, default_language, fresh_runtime, load_qrels, load_queries
from bench.quality import ingest_corpus
from cari import collection
from cari.schema.answer import AnswerRequest
from cari.schema.collections import CollectionCreate
from cari.schema.search import SearchRequest
from cari.settings import load_settings

DATABASE = "cari_bench_answer"
NAME = "answers"


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def run(dataset: Path, split: str, limit: int) -> None:
    settings = load_settings(reembed_interval_s=0, llm_base_url=None, rerank_base_url=None)
    async with fresh_runtime(DATABASE, settings, wrap_embedder=CachingEmbedder) as rt:
        async with rt.pool.connection() as conn:
            await collection.create(
                conn,
                CollectionCreate(name=NAME, language=default_language(dataset)),
                settings,
            )
        counts = await ingest_corpus(rt.ingestor, NAME, dataset)
        async with rt.pool.connection() as conn:
            await conn.execute("VACUUM (ANALYZE) chunks, postings")
        queries = load_queries(dataset)
        qrels = load_qrels(dataset, split)
        judged = [q for q in queries if q in qrels][:limit]
        searcher, answerer = rt.searcher, rt.answerer
        for qid in judged[:5]:  # warm the query-vector cache and the router's examples
            await searcher.search(NAME, SearchRequest(query=queries[qid]))
        search_ms: list[float] = []
        answer_ms: list[float] = []
        empty = cites_relevant = finds_relevant = 0
        for qid in judged:
            text = queries[qid]
            started = time.perf_counter()
            found = await searcher.search(NAME, SearchRequest(query=text))
            search_ms.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            answer = await answerer.answer(await answerer.prepare(NAME, AnswerRequest(query=text)))
            answer_ms.append((time.perf_counter() - started) * 1000)
            relevant = {doc for doc, grade in qrels[qid].items() if grade > 0}
            empty += answer.no_information
            finds_relevant += any(r.document_id in relevant for r in found.results)
            cites_relevant += any(c.document_id in relevant for c in answer.citations.values())
    n = len(judged)
    p50 = statistics.median
    print(f"{dataset.name} ({split}): {counts['chunks']:,} chunks; {n} questions, one at a time")
    print(f"search           p50 {p50(search_ms):7.2f} ms  p95 {percentile(search_ms, 0.95):7.2f}")
    print(f"answer (extract) p50 {p50(answer_ms):7.2f} ms  p95 {percentile(answer_ms, 0.95):7.2f}")
    print(f"ratio            p50 {p50(answer_ms) / p50(search_ms):.2f}")
    print(f"no information: {empty}/{n} ({empty / n:.1%})")
    print(
        f"top k holds a relevant document: {finds_relevant}/{n} ({finds_relevant / n:.1%}); "
        f"the answer cites one: {cites_relevant}/{n} ({cites_relevant / n:.1%})"
    )


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--dataset", type=Path, default=DATASETS / "tydiqa-goldp-id")
    parser.add_argument("--split", default="test")
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(run(args.dataset, args.split, args.queries))


if __name__ == "__main__":
    main()
