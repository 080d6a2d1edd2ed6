"""Retriever lists from small collections, and each question's BM25 ceiling, for bench.fusion.

    python -m bench.fusion_small [--questions 1000] [--group 20] [--size 40] [--full]

On the full sets every keyword list is ~100 deep; in a collection of a few dozen documents it is
short, and its matches may be a couple of common words. For each judged split (TyDi dev and
test, the others' test), `--questions` judged questions are drawn (bench.threshold_small's seed)
and taken in groups of `--group`; each group becomes a collection of its own, built as
bench.threshold_small builds one (the document judged most relevant to each question, then
random others of the set up to `--size`, drawn with the same seed for every group: TyDi's groups
share theirs, the other sets' mostly differ), ingested through the real path. Each question is
searched in its group's collection as bench.quality's `search_runs` searches (the searcher,
threshold 0, 100 candidates), and its keyword and vector lists are written to
`bench/.cache/runs/<dataset>-<split>-small.json` with the documents its collection holds (only
those can be found: the judgements are cut to them) and its BM25 ceiling (what the keyword
statement returns as `ceiling`). With `--full`, each set's whole corpus is ingested instead (as
bench.quality does) and only the ceilings are computed, added to `<dataset>-<split>.json`."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from bench import harness
from bench.embedding_cache import CachingEmbedder
from bench.harness import DATASETS, default_language, fresh_runtime, load_queries
from bench.quality import (
    CHUNK_DOCUMENTS,
    DEPTH,
    RUNS_DIR,
    ingest_collection,
    keyword_ceilings,
    retriever_lists,
    search_runs,
)
from bench.threshold import evidence_settings, query_sets
from bench.threshold_small import documents, picked
from cari import collection
from cari.runtime import Runtime
from cari.schema.collections import CollectionCreate

DATABASE = "cari_bench_fusion_small"


async def small_runs(
    rt: Runtime, folder: Path, split: str, chosen: list[str], args: argparse.Namespace
) -> None:
    """The split's chosen questions, a collection per group, into `<dataset>-<split>-small`."""
    texts = load_queries(folder)
    saved: dict[str, Any] = {"lists": {}, "chunk_documents": {}, "held": {}, "ceilings": {}}
    for start in range(0, len(chosen), args.group):
        group = chosen[start : start + args.group]
        name = f"{folder.name}-{split}-{start // args.group}"
        spec = CollectionCreate(name=name, language=default_language(folder), threshold=0)
        async with rt.pool.connection() as conn:
            await collection.create(conn, spec, rt.settings)
        made = documents(folder, {f"{folder.name}/{split}": group}, args.size)
        result = await rt.ingestor.ingest(name, made)
        if result.warnings:
            raise RuntimeError(f"ingest degraded, figures would be wrong: {result.warnings[0]}")
        async with rt.pool.connection() as conn:
            cur = await conn.execute(CHUNK_DOCUMENTS, {"name": name})
            chunk_docs = {int(chunk_id): str(doc) for chunk_id, doc in await cur.fetchall()}
            cur = await conn.execute(
                "SELECT id FROM collections WHERE name = %(name)s", {"name": name}
            )
            collection_id = (await cur.fetchone() or (None,))[0]
        params = {"collection_id": collection_id, "language": spec.language, "depth": DEPTH}
        chunk_runs, _ = await search_runs(rt, name, params, texts, group)
        lists = retriever_lists(chunk_runs, chunk_docs, group)
        saved["lists"] |= lists["lists"]
        saved["chunk_documents"] |= lists["chunk_documents"]
        saved["held"] |= {q: sorted(set(chunk_docs.values())) for q in group}
        saved["ceilings"] |= await keyword_ceilings(rt, collection_id, {q: texts[q] for q in group})
        print(f"  {name}: {len(made)} documents, {len(chunk_docs)} chunks", flush=True)
    out = RUNS_DIR / f"{folder.name}-{split}-small.json"
    out.write_text(json.dumps({"dataset": folder.name, "split": f"{split}-small", **saved}))


async def full_ceilings(rt: Runtime, folder: Path, split: str) -> None:
    """The ceilings of the questions bench.quality's runs of the split hold, added to them."""
    path = RUNS_DIR / f"{folder.name}-{split}.json"
    saved = json.loads(path.read_text())
    spec = CollectionCreate(name=f"{folder.name}-{split}", language=default_language(folder))
    _, _, _, collection_id = await ingest_collection(rt, spec, folder, None)
    texts = load_queries(folder)
    saved["ceilings"] = await keyword_ceilings(
        rt, collection_id, {q: texts[q] for q in saved["lists"]}
    )
    path.write_text(json.dumps(saved))
    print(f"  {path.name}: {len(saved['ceilings'])} ceilings", flush=True)


async def gather(args: argparse.Namespace) -> None:
    settings = evidence_settings()
    for label, folder, split in query_sets(harness.judged_datasets(DATASETS)):
        print(label, flush=True)
        async with fresh_runtime(DATABASE, settings, wrap_embedder=CachingEmbedder) as rt:
            if args.full:
                await full_ceilings(rt, folder, split)
            else:
                judged = picked(folder, args.questions)[label]
                await small_runs(rt, folder, split, judged, args)


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument(
        "--questions", type=int, default=1000, help="judged questions per split (all, as run)"
    )
    parser.add_argument("--group", type=int, default=20, help="questions per collection")
    parser.add_argument("--size", type=int, default=40, help="documents per collection")
    parser.add_argument(
        "--full", action="store_true", help="the full sets' ceilings only, into their runs"
    )
    asyncio.run(gather(parser.parse_args()))


if __name__ == "__main__":
    main()
