"""`cari tune ef-search` at scale: how long it takes, and whether its recommendation holds on
questions it was not chosen on.

    python -m bench.tune [--chunks 100000 | --dataset DIR] [--sample 200] [--recall 0.99]
                         [--out FILE]

In a fresh database `cari_bench_tune`, a collection of either
- `bench.search`'s corpus of `--chunks` rows (real passages, synthetic vectors around 400 real
  e5 embeddings; its docstring says how), loaded with one COPY, the HNSW index built once and
  the table analysed; or
- a BEIR set's corpus (`--dataset`) through the real ingest path, its passages embedded by the
  local model (`bench.quality.ingest_collection`; the bench's embedding cache makes a rerun
  fast), vacuumed and analysed.

Then, timed, the tuning as the command runs it (`cari.tune.ef_search.tune`, `--sample` chunks
drawn with seed 0 as questions, the default ef_search values, the `--recall` target), and the
check: the recommended ef_search measured again on another draw (seed 1) and on real questions
(up to `--sample` of the set's `queries.jsonl`, or of the five sets' for the synthetic corpus,
embedded by the local model), each with its recall and interval beside the target. On
DATABASE_URL if set, else a throwaway embedded server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

import msgspec

from bench import harness
from bench.embedding_cache import CachingEmbedder
from bench.harness import default_language, fresh_runtime, parser
from bench.quality import ingest_collection
from bench.search import build_corpus, load_queries
from cari.schema.collections import CollectionCreate
from cari.schema.tune import EfSearchTuneRequest, EfSearchTuning
from cari.settings import load_settings
from cari.tune import ef_search

DATABASE = "cari_bench_tune"
COLLECTION = "bench"  # bench.search's


async def run(chunks: int, dataset: Path | None, sample: int, recall: float) -> dict[str, object]:
    settings = load_settings(reembed_interval_s=0, statement_timeout_ms=0, embedder="local")
    async with fresh_runtime(DATABASE, settings, wrap_embedder=CachingEmbedder) as rt:
        began = time.perf_counter()
        if dataset is None:
            await build_corpus(rt, chunks)
            questions = load_queries(sample)
        else:
            spec = CollectionCreate(name=COLLECTION, language=default_language(dataset))
            _, counts, _, _ = await ingest_collection(rt, spec, dataset, print)
            chunks = counts["chunks"]
            questions = list(harness.load_queries(dataset).values())[:sample]
        loaded = time.perf_counter() - began
        print(f"{chunks:,} chunks loaded in {loaded:.0f} s")

        async def measured(**given: object) -> tuple[EfSearchTuning, float]:
            request = msgspec.convert(
                {"sample": sample, "recall": recall, **given}, EfSearchTuneRequest
            )
            started = time.perf_counter()
            found = await ef_search.tune(rt.pool, COLLECTION, request, rt.embedders, rt.settings)
            return found, time.perf_counter() - started

        tuned, seconds = await measured()
        print(table(tuned, f"seed 0, {seconds:.0f} s"))
        checks = {}
        if tuned.recommended is not None:
            for name, given in (
                ("another draw (seed 1)", {"seed": 1}),
                ("real questions", {"questions": questions}),
            ):
                check, took = await measured(values=[tuned.recommended], **given)
                print(table(check, f"{name}, {took:.0f} s"))
                checks[name] = msgspec.to_builtins(check.points[0])
    return {
        "chunks": chunks,
        "load_s": round(loaded, 1),
        "tune_s": round(seconds, 1),
        "tuning": msgspec.to_builtins(tuned),
        "checks": checks,
    }


def table(result: EfSearchTuning, what: str) -> str:
    lines = [f"{result.questions} questions ({what}); exact scan p50 {result.exact_p50_ms:.1f} ms"]
    lines += ["ef_search  recall@10 [95 %]          p50 ms  p95 ms  plan"]
    for p in result.points:
        mark = "  <- recommended" if p.ef_search == result.recommended else ""
        plan = "index" if p.index_used else "exact"
        lines.append(
            f"{p.ef_search:>9}  {p.recall:.4f} [{p.recall_low:.4f}, {p.recall_high:.4f}]"
            f"  {p.p50_ms:6.2f}  {p.p95_ms:6.2f}  {plan}{mark}"
        )
    return "\n".join(lines)


def main() -> None:
    options = parser(__doc__)
    options.add_argument("--chunks", type=int, default=100_000, help="synthetic rows")
    options.add_argument("--dataset", type=Path, help="a BEIR-format folder, instead")
    options.add_argument("--sample", type=int, default=200)
    options.add_argument("--recall", type=float, default=0.99)
    options.add_argument("--out", type=Path)
    args: argparse.Namespace = options.parse_args()
    result = asyncio.run(run(args.chunks, args.dataset, args.sample, args.recall))
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
