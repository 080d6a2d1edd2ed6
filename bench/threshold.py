"""The relevance threshold: on-topic questions keep their results, off-topic ones come back empty.

    python -m bench.threshold [--dataset DIR ...] [--out bench/results/threshold.json]

Every dataset of ../shared/eval/datasets goes into its own collection of one database (through
the real ingest path, embeddings from the on-disk cache of `bench.quality`). Then every judged
query of each set (TyDi: `dev`, for tuning, and `test`; the others: `test`) is searched by
`Searcher.search`, hybrid with the collection's defaults, `top_k` 20 and threshold 0, so that
every weighed chunk comes back with its evidence (cosine and term coverage, from `explain`):

- on-topic: against its own collection; Recall@10 and nDCG@10 with the threshold applied,
  against the same run without one;
- off-topic: against every other collection whose subject differs (Cranfield's aeronautics
  against MED's medicine, TyDi's Indonesian Wikipedia questions against CACM's computing, ...).
  CISI, CACM and ADI all hold information-retrieval papers, so they are not off-topic to each
  other and are not paired.

The evidence is replayed offline through `cari.search.relevance.Scale` for a grid of cosine
floors and ceilings at threshold 0.25, and for the chosen scale over thresholds 0 to 0.6:
off-topic empty rate, on-topic empty rate, the drop of Recall@10. The scale is chosen on the
tuning sets (TyDi dev, Cranfield, CISI as queries): the most off-topic questions empty while
Recall@10 drops by at most 0.01; it is reported on all. A replay matches the engine exactly: it
applies `cari.search.relevance.keep` to the weighed head in fused order, as the engine does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.database import fresh_runtime
from bench.embedding_cache import CACHE_DIR, CachingEmbedder
from bench.quality import (
    DATASETS,
    default_language,
    document_ranking,
    evaluate,
    ingest_corpus,
    load_qrels,
    load_queries,
)
from cari import collection
from cari.search.engine import Searcher, SearchRequest
from cari.search.relevance import Evidence, Scale, keep
from cari.settings import load_settings

DATABASE = "cari_bench_threshold"
EVIDENCE = CACHE_DIR / "threshold-evidence.json"
TOP_K = 10
WEIGHED = 2 * TOP_K  # the engine weighs max(2·top_k, 10) fused chunks
THRESHOLD = 0.25
TUNING = ("tydiqa-goldp-id/dev", "cranfield/test", "cisi/test")
SAME_SUBJECT = {"cisi", "cacm", "adi"}  # information retrieval and documentation, all three
FLOORS = [round(0.74 + 0.01 * i, 2) for i in range(12)]
CEILINGS = [0.90, 0.92, 0.94, 0.96, 0.98, 1.0]

# query set -> collection -> query id -> [(document id, cosine, coverage), ...] in fused order
Runs = dict[str, dict[str, dict[str, list[tuple[str, float | None, float]]]]]


def query_sets(folders: Sequence[Path]) -> list[tuple[str, Path, str]]:
    """(label, folder, split) for each judged split: TyDi dev and test, the others' test."""
    sets = []
    for folder in folders:
        for split in ("dev", "test"):
            if (folder / "qrels" / f"{split}.tsv").exists():
                sets.append((f"{folder.name}/{split}", folder, split))
    return sets


def off_topic(query_folder: str, collection_name: str) -> bool:
    return query_folder != collection_name and not {query_folder, collection_name} <= SAME_SUBJECT


async def gather(folders: Sequence[Path]) -> dict[str, Any]:
    settings = load_settings(reembed_interval_s=0, statement_timeout_ms=0)
    runs: Runs = {}
    chunks: dict[str, int] = {}
    async with fresh_runtime(DATABASE, settings, wrap_embedder=CachingEmbedder) as rt:
        pool, ingestor, searcher = rt.pool, rt.ingestor, rt.searcher
        for folder in folders:
            began = time.perf_counter()
            async with pool.connection() as conn:
                await collection.create(
                    conn,
                    collection.CollectionCreate(
                        name=folder.name, language=default_language(folder), threshold=0
                    ),
                    settings,
                )
            counts = await ingest_corpus(ingestor, folder.name, folder)
            chunks[folder.name] = counts["chunks"]
            print(
                f"ingested {folder.name}: {counts['chunks']:,} chunks in "
                f"{time.perf_counter() - began:.0f} s",
                flush=True,
            )
        async with pool.connection() as conn:
            await conn.execute("VACUUM (ANALYZE) chunks, postings")
            cur = await conn.execute(
                "SELECT c.id, d.external_id FROM chunks c JOIN documents d ON d.id = c.document_id"
            )
            documents = {int(chunk): str(doc) for chunk, doc in await cur.fetchall()}
        for label, folder, split in query_sets(folders):
            queries = load_queries(folder)
            judged = [qid for qid in queries if qid in load_qrels(folder, split)]
            runs[label] = {}
            for target in folders:
                if target.name != folder.name and not off_topic(folder.name, target.name):
                    continue
                began = time.perf_counter()
                runs[label][target.name] = {
                    qid: await weighed(searcher, target.name, queries[qid], documents)
                    for qid in judged
                }
                print(
                    f"{label} against {target.name}: {len(judged)} queries in "
                    f"{time.perf_counter() - began:.0f} s",
                    flush=True,
                )
    return {"chunks": chunks, "runs": runs}


async def weighed(
    searcher: Searcher, name: str, text: str, documents: dict[int, str]
) -> list[tuple[str, float | None, float]]:
    """The weighed chunks of one search in fused order, each as (document, cosine, coverage)."""
    request = SearchRequest(query=text, top_k=WEIGHED, threshold=0, explain=True)
    response = await searcher.search(name, request)
    assert response.explain is not None
    evidence = {
        kept["id"]: (kept["cosine"], kept["coverage"])
        for part in response.explain["sub_queries"]
        for kept in part["kept"]
    }
    return [
        (documents[r.chunk_id], *evidence[r.id]) for r in response.results if r.chunk_id is not None
    ]


@dataclass(frozen=True, slots=True)
class Outcome:
    off_topic_empty: float  # share of off-topic searches with no result
    on_topic_empty: float  # share of on-topic searches with no result
    recall_drop: float  # mean Recall@10 without the threshold minus with it
    ndcg_drop: float


Rule = Callable[[Sequence[float], float], list[bool]]


def single_cut(scores: Sequence[float], threshold: float) -> list[bool]:
    """The alternative rule, measured against `keep`: every chunk below the threshold dropped."""
    return [score >= threshold for score in scores]


def replay(
    hits: Sequence[tuple[str, float | None, float]],
    scale: Scale,
    threshold: float,
    rule: Rule = keep,
) -> list[str]:
    """The documents the engine returns from these weighed chunks at this scale and threshold."""
    scores = [scale.relevance(Evidence(cosine, coverage)) for _, cosine, coverage in hits]
    kept = [hit[0] for hit, ok in zip(hits, rule(scores, threshold), strict=True) if ok]
    return document_ranking(kept[:TOP_K])


def outcome(
    data: dict[str, Any],
    labels: Iterable[str],
    scale: Scale,
    threshold: float,
    rule: Rule = keep,
) -> Outcome:
    off_empty = off_total = on_empty = on_total = 0
    drops: list[tuple[float, float]] = []
    for label in labels:
        folder, split = label.split("/")
        qrels = load_qrels(DATASETS / folder, split)
        for target, per_query in data["runs"][label].items():
            if target != folder:
                off_total += len(per_query)
                off_empty += sum(
                    1 for hits in per_query.values() if not replay(hits, scale, threshold, rule)
                )
                continue
            base = {
                q: document_ranking([h[0] for h in hits][:TOP_K]) for q, hits in per_query.items()
            }
            cut = {q: replay(hits, scale, threshold, rule) for q, hits in per_query.items()}
            on_total += len(cut)
            on_empty += sum(1 for docs in cut.values() if not docs)
            judged = {q: qrels[q] for q in per_query}
            before = evaluate(judged, base, TOP_K)
            after = evaluate(judged, cut, TOP_K)
            for q in per_query:
                drops.append(
                    (
                        before[q][f"Recall@{TOP_K}"] - after[q][f"Recall@{TOP_K}"],
                        before[q]["nDCG@10"] - after[q]["nDCG@10"],
                    )
                )
    return Outcome(
        off_empty / off_total if off_total else 1.0,
        on_empty / on_total if on_total else 0.0,
        sum(d[0] for d in drops) / len(drops) if drops else 0.0,
        sum(d[1] for d in drops) / len(drops) if drops else 0.0,
    )


def choose(data: dict[str, Any]) -> tuple[Scale, list[dict[str, Any]]]:
    """The scale meeting the targets on the tuning sets with the most off-topic empties
    (ties: the smaller recall drop), and every grid point's figures."""
    labels = [label for label in TUNING if label in data["runs"]]
    grid = []
    for floor in FLOORS:
        for ceiling in CEILINGS:
            scale = Scale(floor, ceiling)
            found = outcome(data, labels, scale, THRESHOLD)
            grid.append({"floor": floor, "ceiling": ceiling, **asdict(found)})
    meeting = [g for g in grid if g["recall_drop"] <= 0.01] or grid
    best = max(meeting, key=lambda g: (g["off_topic_empty"], -g["recall_drop"]))
    return Scale(best["floor"], best["ceiling"]), grid


def per_pair(data: dict[str, Any], scale: Scale, threshold: float) -> list[dict[str, Any]]:
    rows = []
    for label, targets in data["runs"].items():
        for target in targets:
            sub = {"chunks": data["chunks"], "runs": {label: {target: targets[target]}}}
            found = outcome(sub, [label], scale, threshold)
            on = target == label.split("/")[0]
            rows.append(
                {
                    "queries": label,
                    "collection": target,
                    "on_topic": on,
                    "empty": found.on_topic_empty if on else found.off_topic_empty,
                    "recall_drop": found.recall_drop if on else None,
                    "ndcg_drop": found.ndcg_drop if on else None,
                }
            )
    return rows


def report(data: dict[str, Any], scale: Scale, grid: list[dict[str, Any]]) -> str:
    lines = [
        f"scale chosen on {', '.join(TUNING)}: cosine floor {scale.cosine_floor}, "
        f"ceiling {scale.cosine_ceiling}; threshold {THRESHOLD}",
        "",
    ]
    lines.append(f"{'queries':<22} {'collection':<18} {'empty':>7} {'ΔR@10':>8} {'ΔnDCG@10':>9}")
    for row in per_pair(data, scale, THRESHOLD):
        drop = "" if row["recall_drop"] is None else f"{-row['recall_drop']:>8.4f}"
        ndcg = "" if row["ndcg_drop"] is None else f"{-row['ndcg_drop']:>9.4f}"
        kind = "on " if row["on_topic"] else "off"
        lines.append(
            f"{row['queries']:<22} {kind} {row['collection']:<14} "
            f"{row['empty']:>7.1%} {drop} {ndcg}"
        )
    tuning = [label for label in TUNING if label in data["runs"]]
    groups = {
        "tuning sets": tuning,
        "reporting sets": [label for label in data["runs"] if label not in tuning],
    }
    lines.append("")
    for name, labels in groups.items():
        found = outcome(data, labels, scale, THRESHOLD)
        lines.append(
            f"{name}: off-topic empty {found.off_topic_empty:.1%}, on-topic empty "
            f"{found.on_topic_empty:.1%}, ΔR@10 {-found.recall_drop:.4f}, "
            f"ΔnDCG@10 {-found.ndcg_drop:.4f}"
        )
    cut = [
        outcome(data, tuning, Scale(g["floor"], g["ceiling"]), THRESHOLD, single_cut) for g in grid
    ]
    within = [o for o in cut if o.recall_drop <= 0.01]
    best = max(within, key=lambda o: o.off_topic_empty) if within else None
    same = outcome(data, tuning, scale, THRESHOLD, single_cut)
    lines += [
        "",
        "the alternative rule, a single cut at the threshold, on the tuning sets: "
        + (
            f"at best {best.off_topic_empty:.1%} off-topic empty within ΔR@10 0.01; "
            if best
            else "nothing within ΔR@10 0.01; "
        )
        + f"at the chosen scale {same.off_topic_empty:.1%} empty, "
        f"ΔR@10 {-same.recall_drop:.4f}",
    ]
    lines += [
        "",
        "all sets, by threshold (chosen scale):",
        f"{'threshold':>9} {'off empty':>10} {'on empty':>9} {'ΔR@10':>8} {'ΔnDCG@10':>9}",
    ]
    for threshold in [round(0.05 * i, 2) for i in range(13)]:
        found = outcome(data, data["runs"], scale, threshold)
        lines.append(
            f"{threshold:>9.2f} {found.off_topic_empty:>10.1%} "
            f"{found.on_topic_empty:>9.1%} {-found.recall_drop:>8.4f} "
            f"{-found.ndcg_drop:>9.4f}"
        )
    meeting = [g for g in grid if g["recall_drop"] <= 0.01]
    tuned = sorted(meeting, key=lambda g: (-g["off_topic_empty"], g["recall_drop"]))[:8]
    lines += [
        "",
        "grid on the tuning sets at threshold 0.25, Recall@10 dropping by 0.01 at most "
        "(best off-topic empty first):",
    ]
    for g in tuned:
        lines.append(
            f"floor {g['floor']:.2f} ceiling {g['ceiling']:.2f}: off empty "
            f"{g['off_topic_empty']:.1%}, on empty {g['on_topic_empty']:.1%}, "
            f"ΔR@10 {-g['recall_drop']:.4f}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dataset", type=Path, action="append", help="a BEIR-format folder (repeatable)"
    )
    parser.add_argument(
        "--reuse", action="store_true", help=f"replay the evidence kept in {EVIDENCE}"
    )
    parser.add_argument("--out", type=Path, help="write the figures to this JSON file")
    args = parser.parse_args()
    if args.reuse:
        data = json.loads(EVIDENCE.read_text())
    else:
        folders = args.dataset or sorted(d for d in DATASETS.iterdir() if (d / "qrels").is_dir())
        data = asyncio.run(gather(folders))
        EVIDENCE.parent.mkdir(parents=True, exist_ok=True)
        EVIDENCE.write_text(json.dumps(data))
    scale, grid = choose(data)
    print(report(data, scale, grid))
    if args.out is not None:
        args.out.write_text(
            json.dumps(
                {
                    "threshold": THRESHOLD,
                    "scale": {"floor": scale.cosine_floor, "ceiling": scale.cosine_ceiling},
                    "pairs": per_pair(data, scale, THRESHOLD),
                    "grid": grid,
                },
                indent=1,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
