"""The relevance threshold: on-topic questions keep their results, off-topic ones come back empty.

    python -m bench.threshold [--dataset DIR ...] [--typo-weight W] [--reuse] [--out FILE]

Every dataset of ../shared/eval/datasets goes into its own collection of one database (through
the real ingest path, embeddings from the on-disk cache of `bench.quality`). Then every judged
query of each set (TyDi: `dev`, for tuning, and `test`; the others: `test`) is searched by
`Searcher.search`, hybrid with the collection's defaults (`--typo-weight`: that typo tolerance
instead, its evidence kept in a file of its own), `top_k` 20 and threshold 0, so that
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

Then the scale fitted to each collection (`cari.search.fit`) against that global one, in the
same run: each collection is probed as the server fits it (its pseudo-questions and the bundled
everyday questions, each one's best cosine there), every placement of `PLACEMENTS` is replayed
on the tuning sets, the one meeting the targets there (Recall@10 dropping by at most 0.01, at
most 2 % of each set's questions empty) with the most off-topic empties is chosen, and every
set is reported on the global scale and on the fitted ones. `--reuse` with evidence kept before
the fit existed ingests the sets again to probe them, without searching.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from bench import harness
from bench.embedding_cache import CACHE_DIR, CachingEmbedder
from bench.harness import (
    DATASETS,
    default_language,
    fresh_runtime,
    judged_datasets,
    load_qrels,
    load_queries,
)
from bench.quality import document_ranking, evaluate, ingest_corpus
from cari import collection
from cari.runtime import Runtime
from cari.schema.collections import CollectionCreate
from cari.schema.search import SearchRequest
from cari.search import fit
from cari.search.engine import Searcher
from cari.search.relevance import Evidence, Scale, keep
from cari.settings import Settings, load_settings

DATABASE = "cari_bench_threshold"
EVIDENCE = CACHE_DIR / "threshold-evidence.json"
TOP_K = 10
WEIGHED = 2 * TOP_K  # the engine weighs max(2·top_k, 10) fused chunks
THRESHOLD = 0.25
TUNING = ("tydiqa-goldp-id/dev", "cranfield/test", "cisi/test")
SAME_SUBJECT = {"cisi", "cacm", "adi"}  # information retrieval and documentation, all three
FLOORS = [round(0.74 + 0.01 * i, 2) for i in range(12)]
CEILINGS = [0.90, 0.92, 0.94, 0.96, 0.98, 1.0]

# query set -> collection -> query id -> [(document id, cosine, coverage, specificity), ...] in
# fused order
Hit = tuple[str, float | None, float, float]
Runs = dict[str, dict[str, dict[str, list[Hit]]]]


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


async def gather(
    folders: Sequence[Path], *, search: bool = True, typo_weight: float | None = None
) -> dict[str, Any]:
    """Ingest every set, probe each collection as `cari.search.fit` does, and (`search`) run
    every judged question on-topic and off-topic; the collections' `typo_weight` is theirs by
    default."""
    settings = evidence_settings()
    runs: Runs = {}
    chunks: dict[str, int] = {}
    async with fresh_runtime(DATABASE, settings, wrap_embedder=CachingEmbedder) as rt:
        pool, ingestor, searcher = rt.pool, rt.ingestor, rt.searcher
        for folder in folders:
            began = time.perf_counter()
            await create_collection(rt, folder, typo_weight)
            counts = await ingest_corpus(ingestor, folder.name, folder)
            chunks[folder.name] = counts["chunks"]
            print(
                f"ingested {folder.name}: {counts['chunks']:,} chunks in "
                f"{time.perf_counter() - began:.0f} s",
                flush=True,
            )
        async with pool.connection() as conn:
            await conn.execute("VACUUM (ANALYZE) chunks, postings")
            documents = await chunk_documents(conn)
            probes = await probe_all(
                rt,
                conn,
                folders,
                lambda name, found, seconds: (
                    f"probed {name}: {len(found.on_topic)} own, {len(found.off_topic)} "
                    f"other-subject questions in {seconds:.1f} s"
                ),
            )
        for label, folder, split in query_sets(folders) if search else []:
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
    return {"chunks": chunks, "runs": runs, "probes": probes}


def evidence_settings() -> Settings:
    return load_settings(
        reembed_interval_s=0,
        statement_timeout_ms=0,
        # On a busy machine a question's embedding may take seconds: a search that gave up on
        # it would degrade to keyword results, and its evidence would have no cosine.
        embedding_query_timeout_s=600,
    )


async def create_collection(rt: Runtime, folder: Path, typo_weight: float | None) -> None:
    """The set's collection, in its language, with no relevance threshold; its typo tolerance
    the default's unless `typo_weight` is given."""
    created = CollectionCreate(name=folder.name, language=default_language(folder), threshold=0)
    if typo_weight is not None:
        created = msgspec.structs.replace(created, typo_weight=typo_weight)
    async with rt.pool.connection() as conn:
        await collection.create(conn, created, rt.settings)


def typo_options(parser: argparse.ArgumentParser) -> None:
    """`--typo-weight W`: the collections' typo tolerance instead of the default's."""
    parser.add_argument(
        "--typo-weight",
        type=float,
        help="the collections' typo_weight (default: a new collection's); its evidence is kept "
        "apart",
    )


def evidence_path(default: Path, typo_weight: float | None) -> Path:
    """Where the evidence gathered at `typo_weight` is kept (None: the collections' default)."""
    if typo_weight is None:
        return default
    return default.with_name(f"{default.stem}-typo-{typo_weight:g}{default.suffix}")


async def chunk_documents(conn: Any) -> dict[int, str]:
    """Every chunk's document (external id)."""
    cur = await conn.execute(
        "SELECT c.id, d.external_id FROM chunks c JOIN documents d ON d.id = c.document_id"
    )
    return {int(chunk): str(doc) for chunk, doc in await cur.fetchall()}


async def probe_all(
    rt: Runtime, conn: Any, folders: Sequence[Path], line: Callable[[str, fit.Probes, float], str]
) -> dict[str, dict[str, list[float]]]:
    """Each set's collection probed as `cari.search.fit` does; `line` says each as it is done."""
    probes: dict[str, dict[str, list[float]]] = {}
    for folder in folders:
        began = time.perf_counter()
        found = await fit.probe(
            conn, await collection_id(conn, folder.name), rt.embedder, rt.settings
        )
        assert found is not None
        probes[folder.name] = asdict(found)
        print(line(folder.name, found, time.perf_counter() - began), flush=True)
    return probes


async def collection_id(conn: Any, name: str) -> int:
    cur = await conn.execute("SELECT id FROM collections WHERE name = %s", (name,))
    row = await cur.fetchone()
    return int(row[0])


async def weighed(searcher: Searcher, name: str, text: str, documents: dict[int, str]) -> list[Hit]:
    """The weighed chunks of one search in fused order, each as (document, cosine, coverage,
    specificity)."""
    request = SearchRequest(query=text, top_k=WEIGHED, threshold=0, explain=True)
    response = await searcher.search(name, request)
    if response.degraded:  # keyword results only: no cosine to weigh
        raise RuntimeError(f"search degraded, figures would be wrong: {response.warnings}")
    assert response.explain is not None
    evidence = {
        kept.id: (kept.cosine, kept.coverage, kept.specificity)
        for part in response.explain.sub_queries
        for kept in part.kept
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
    hits: Sequence[Hit],
    scale: Scale,
    threshold: float,
    rule: Rule = keep,
) -> list[str]:
    """The documents the engine returns from these weighed chunks at this scale and threshold."""
    scores = [scale.relevance(Evidence(c, v, s)) for _, c, v, s in hits]
    kept = [hit[0] for hit, ok in zip(hits, rule(scores, threshold), strict=True) if ok]
    return document_ranking(kept[:TOP_K])


def outcome(
    data: dict[str, Any],
    labels: Iterable[str],
    scale: Scale | Mapping[str, Scale],
    threshold: float,
    rule: Rule = keep,
) -> Outcome:
    """The figures of these query sets, each collection weighed on `scale` (or its own)."""
    off_empty = off_total = on_empty = on_total = 0
    drops: list[tuple[float, float]] = []
    for label in labels:
        for target, per_query in data["runs"][label].items():
            here = scale if isinstance(scale, Scale) else scale[target]
            empty, pair_drops = pair(label, target, per_query, here, threshold, rule)
            if target != label.split("/")[0]:
                off_total += len(per_query)
                off_empty += empty
            else:
                on_total += len(per_query)
                on_empty += empty
                drops += pair_drops
    return Outcome(
        off_empty / off_total if off_total else 1.0,
        on_empty / on_total if on_total else 0.0,
        sum(d[0] for d in drops) / len(drops) if drops else 0.0,
        sum(d[1] for d in drops) / len(drops) if drops else 0.0,
    )


_pairs: dict[tuple[Any, ...], tuple[int, list[tuple[float, float]]]] = {}


def pair(
    label: str,
    target: str,
    per_query: dict[str, list[Hit]],
    scale: Scale,
    threshold: float,
    rule: Rule,
) -> tuple[int, list[tuple[float, float]]]:
    """One query set against one collection: how many come back empty and, on-topic, each
    question's drop of Recall@10 and nDCG@10 (kept: grids replay the same pair often)."""
    key = (label, target, id(per_query), scale, threshold, rule)
    if (known := _pairs.get(key)) is not None:
        return known
    folder, split = label.split("/")
    cut = {q: replay(hits, scale, threshold, rule) for q, hits in per_query.items()}
    empty = sum(1 for docs in cut.values() if not docs)
    drops: list[tuple[float, float]] = []
    if target == folder:
        qrels = load_qrels(DATASETS / folder, split)
        base = {q: document_ranking([h[0] for h in hits][:TOP_K]) for q, hits in per_query.items()}
        judged = {q: qrels[q] for q in per_query}
        before = evaluate(judged, base, TOP_K)
        after = evaluate(judged, cut, TOP_K)
        drops = [
            (
                before[q][f"Recall@{TOP_K}"] - after[q][f"Recall@{TOP_K}"],
                before[q]["nDCG@10"] - after[q]["nDCG@10"],
            )
            for q in per_query
        ]
    _pairs[key] = (empty, drops)
    return empty, drops


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


PLACEMENTS = [
    fit.Placement(off_quantile, margin, on_quantile, max_shift)
    for off_quantile in (0.8, 0.9, 0.95, 1.0)
    for margin in [round(-0.02 + 0.01 * i, 2) for i in range(9)]
    for on_quantile in (None, 0.05, 0.1, 0.25)
    for max_shift in (0.03, 0.05, 0.08)
]


def fitted(data: dict[str, Any], base: Scale, placement: fit.Placement) -> dict[str, Scale]:
    """Each collection's scale as `cari.search.fit` places it from its probes."""
    return {
        name: fit.place(fit.Probes(**found), base, placement)
        for name, found in data["probes"].items()
    }


def choose_placement(data: dict[str, Any], base: Scale) -> tuple[fit.Placement, int]:
    """The placement meeting the targets on the tuning sets (Recall@10 dropping by at most 0.01
    over them, at most 2 % of each set's on-topic questions empty) with the most off-topic
    empties (ties: the smaller recall drop); and how many placements met them."""
    tuning = [label for label in TUNING if label in data["runs"]]
    scored = []
    for placement in PLACEMENTS:
        scales = fitted(data, base, placement)
        overall = outcome(data, tuning, scales, THRESHOLD)
        worst = max(outcome(data, [label], scales, THRESHOLD).on_topic_empty for label in tuning)
        scored.append((placement, overall, worst))
    meeting = [s for s in scored if s[1].recall_drop <= 0.01 and s[2] <= 0.02]
    best = max(meeting or scored, key=lambda s: (s[1].off_topic_empty, -s[1].recall_drop, -s[2]))
    return best[0], len(meeting)


def compare(data: dict[str, Any], base: Scale) -> tuple[str, dict[str, Any]]:
    """The fitted scales against the global one, per query set and over the groups."""
    placement, meeting = choose_placement(data, base)
    scales = fitted(data, base, placement)
    lines = [
        f"fitted scales: placement chosen on {', '.join(TUNING)} ({meeting} of "
        f"{len(PLACEMENTS)} meet the targets there): {placement}",
        f"global scale: cosine floor {base.cosine_floor}, ceiling {base.cosine_ceiling}; "
        f"threshold {THRESHOLD}",
        "",
        f"{'collection':<18} {'chunks':>7} {'floor':>7} {'ceiling':>8} "
        f"{'own median':>10} {'other median':>12}",
    ]
    for name, scale in scales.items():
        found = data["probes"][name]
        lines.append(
            f"{name:<18} {data['chunks'][name]:>7} {scale.cosine_floor:>7.4f} "
            f"{scale.cosine_ceiling:>8.4f} {np.median(found['on_topic']):>10.4f} "
            f"{np.median(found['off_topic']):>12.4f}"
        )
    lines += [
        "",
        f"{'queries':<22} {'on empty':>17} {'ΔR@10':>17} {'ΔnDCG@10':>17} {'off empty':>17}",
        f"{'':<22} {'global / fitted':>17} {'global / fitted':>17} {'global / fitted':>17} "
        f"{'global / fitted':>17}",
    ]
    rows: dict[str, Any] = {}
    tuning = [label for label in TUNING if label in data["runs"]]
    groups = {label: [label] for label in data["runs"]}
    groups["tuning sets"] = tuning
    groups["reporting sets"] = [label for label in data["runs"] if label not in tuning]
    groups["all sets"] = list(data["runs"])
    for name, labels in groups.items():
        before = outcome(data, labels, base, THRESHOLD)
        after = outcome(data, labels, scales, THRESHOLD)
        rows[name] = {"global": asdict(before), "fitted": asdict(after)}
        lines.append(
            f"{name:<22} {before.on_topic_empty:>8.1%} {after.on_topic_empty:>8.1%} "
            f"{-before.recall_drop:>8.4f} {-after.recall_drop:>8.4f} "
            f"{-before.ndcg_drop:>8.4f} {-after.ndcg_drop:>8.4f} "
            f"{before.off_topic_empty:>8.1%} {after.off_topic_empty:>8.1%}"
        )
    figures = {
        "placement": asdict(placement),
        "scales": {n: [s.cosine_floor, s.cosine_ceiling] for n, s in scales.items()},
        "sets": rows,
    }
    return "\n".join(lines), figures


def main() -> None:
    parser = harness.parser(__doc__)
    harness.dataset_options(parser, split=False)
    parser.add_argument(
        "--reuse", action="store_true", help=f"replay the evidence kept in {EVIDENCE}"
    )
    parser.add_argument("--out", type=Path, help="write the figures to this JSON file")
    typo_options(parser)
    args = parser.parse_args()
    folders = args.dataset or judged_datasets()
    kept = evidence_path(EVIDENCE, args.typo_weight)
    if args.reuse:
        data = json.loads(kept.read_text())
        if "probes" not in data:  # evidence kept before the fit existed: probe, not search
            data["probes"] = asyncio.run(gather(folders, search=False))["probes"]
            kept.write_text(json.dumps(data))
    else:
        data = asyncio.run(gather(folders, typo_weight=args.typo_weight))
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(json.dumps(data))
    scale, grid = choose(data)
    print(report(data, scale, grid))
    base = Scale(*load_settings().cosine_scale(None))
    comparison, figures = compare(data, base)
    print("\n" + comparison)
    if args.out is not None:
        args.out.write_text(
            json.dumps(
                {
                    "threshold": THRESHOLD,
                    "scale": {"floor": scale.cosine_floor, "ceiling": scale.cosine_ceiling},
                    "pairs": per_pair(data, scale, THRESHOLD),
                    "grid": grid,
                    "fitted": figures,
                },
                indent=1,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
