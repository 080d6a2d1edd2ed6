"""The relevance threshold in small collections: the global scale against each one's fitted scale.

    python -m bench.threshold_small [--questions 30] [--size 60] [--typo-weight W] [--reuse]
                                    [--out FILE]

`bench.threshold` measures collections of 82 to 4,692 chunks; a small collection (a few dozen
notes) is where one global scale was too strict: a question paraphrasing a document came back
with nothing. Here each dataset of ../shared/eval/datasets becomes a small collection of its own
in one database: for `--questions` judged questions of each judged split (drawn with a fixed
seed), the document judged most relevant to each, and other documents of the set drawn at
random up to `--size`. Each collection is fitted as the server fits it (`cari.search.fit`, the
shipped placement); the picked questions are searched against their own small collection
(on-topic) and the other subjects' (off-topic, `bench.threshold`'s pairing), threshold 0, and
replayed at threshold 0.25 on the global scale and on each collection's fitted one. Paraphrases:
the on-topic questions that share no word with their relevant document (its term coverage 0).
"""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench import harness
from bench.embedding_cache import CACHE_DIR, CachingEmbedder
from bench.harness import (
    DATASETS,
    corpus_records,
    fresh_runtime,
    judged_datasets,
    load_qrels,
    load_queries,
)
from bench.threshold import (
    THRESHOLD,
    Runs,
    chunk_documents,
    create_collection,
    evidence_path,
    evidence_settings,
    off_topic,
    outcome,
    probe_all,
    query_sets,
    replay,
    typo_options,
    weighed,
)
from cari.ingest.formats import Section
from cari.ingest.store import NewDocument
from cari.search import fit
from cari.search.relevance import Scale
from cari.settings import load_settings

DATABASE = "cari_bench_threshold_small"
EVIDENCE = CACHE_DIR / "threshold-small-evidence.json"
SEED = 25


def picked(folder: Path, questions: int) -> dict[str, list[str]]:
    """Split label -> the judged questions drawn from it."""
    rng = random.Random(SEED)
    chosen = {}
    for label, _, split in query_sets([folder]):
        judged = sorted(q for q, docs in load_qrels(folder, split).items() if docs)
        chosen[label] = sorted(rng.sample(judged, min(questions, len(judged))))
    return chosen


def documents(folder: Path, chosen: dict[str, list[str]], size: int) -> list[NewDocument]:
    """The most relevant document of each chosen question, then random others up to `size`."""
    wanted: list[str] = []
    for label, questions in chosen.items():
        qrels = load_qrels(folder, label.split("/")[1])
        for q in questions:
            best = max(qrels[q].items(), key=lambda item: (item[1], item[0]))[0]
            if best not in wanted:
                wanted.append(best)
    records = {r["id"]: r for r in corpus_records(folder) if (r["text"] or r["title"]).strip()}
    others = sorted(set(records) - set(wanted))
    rng = random.Random(SEED)
    wanted += rng.sample(others, max(0, min(len(others), size - len(wanted))))
    return [
        NewDocument(
            d,
            records[d]["title"],
            [Section(records[d]["text"] if records[d]["text"].strip() else records[d]["title"])],
            {},
            None,
        )
        for d in wanted
        if d in records
    ]


async def gather(
    folders: list[Path], questions: int, size: int, typo_weight: float | None
) -> dict[str, Any]:
    settings = evidence_settings()
    runs: Runs = {}
    chunks: dict[str, int] = {}
    chosen = {folder.name: picked(folder, questions) for folder in folders}
    async with fresh_runtime(DATABASE, settings, wrap_embedder=CachingEmbedder) as rt:
        for folder in folders:
            await create_collection(rt, folder, typo_weight)
            result = await rt.ingestor.ingest(
                folder.name, documents(folder, chosen[folder.name], size)
            )
            chunks[folder.name] = sum(o.chunks for o in result.outcomes)
        async with rt.pool.connection() as conn:
            ids = await chunk_documents(conn)
            probes = await probe_all(
                rt,
                conn,
                folders,
                lambda name, _, seconds: (
                    f"{name}: {chunks[name]} chunks, probed in {seconds:.1f} s"
                ),
            )
        for folder in folders:
            texts = load_queries(folder)
            for label, questions_here in chosen[folder.name].items():
                runs[label] = {}
                for target in folders:
                    if target.name != folder.name and not off_topic(folder.name, target.name):
                        continue
                    runs[label][target.name] = {
                        q: await weighed(rt.searcher, target.name, texts[q], ids)
                        for q in questions_here
                    }
    return {"chunks": chunks, "runs": runs, "probes": probes}


def paraphrases(data: dict[str, Any], label: str) -> dict[str, Any]:
    """The on-topic questions of `label` whose relevant documents share no word with them."""
    folder, split = label.split("/")
    qrels = load_qrels(DATASETS / folder, split)
    own = data["runs"][label][folder]
    return {
        q: hits
        for q, hits in own.items()
        if (relevant := [h for h in hits if h[0] in qrels[q]]) and all(h[2] == 0 for h in relevant)
    }


def report(data: dict[str, Any], base: Scale) -> tuple[str, dict[str, Any]]:
    scales = {name: fit.place(fit.Probes(**found), base) for name, found in data["probes"].items()}
    lines = [
        f"global scale: floor {base.cosine_floor}, ceiling {base.cosine_ceiling}; threshold "
        f"{THRESHOLD}; fitted: {fit.PLACEMENT}",
        "",
    ]
    for name, scale in scales.items():
        lines.append(
            f"{name:<18} {data['chunks'][name]:>4} chunks  fitted floor {scale.cosine_floor:.4f} "
            f"ceiling {scale.cosine_ceiling:.4f}"
        )
    lines += [
        "",
        f"{'queries':<22} {'on empty':>17} {'ΔR@10':>17} {'off empty':>17} "
        f"{'paraphrases empty':>22}",
        f"{'':<22} {'global / fitted':>17} {'global / fitted':>17} {'global / fitted':>17} "
        f"{'global / fitted':>22}",
    ]
    figures: dict[str, Any] = {"scales": {n: asdict(s) for n, s in scales.items()}, "sets": {}}
    groups = {label: [label] for label in data["runs"]}
    groups["all sets"] = list(data["runs"])
    for name, labels in groups.items():
        before = outcome(data, labels, base, THRESHOLD)
        after = outcome(data, labels, scales, THRESHOLD)
        para = {
            (label, q): hits for label in labels for q, hits in paraphrases(data, label).items()
        }
        own = {label: label.split("/")[0] for label in labels}
        para_before = sum(1 for (_, _), hits in para.items() if not replay(hits, base, THRESHOLD))
        para_after = sum(
            1
            for (label, _), hits in para.items()
            if not replay(hits, scales[own[label]], THRESHOLD)
        )
        figures["sets"][name] = {
            "global": asdict(before),
            "fitted": asdict(after),
            "paraphrases": len(para),
            "paraphrases_empty": [para_before, para_after],
        }
        lines.append(
            f"{name:<22} {before.on_topic_empty:>8.1%} {after.on_topic_empty:>8.1%} "
            f"{-before.recall_drop:>8.4f} {-after.recall_drop:>8.4f} "
            f"{before.off_topic_empty:>8.1%} {after.off_topic_empty:>8.1%} "
            f"{para_before:>6} / {para_after:<3} of {len(para):<4}"
        )
    return "\n".join(lines), figures


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--questions", type=int, default=30, help="judged questions per split")
    parser.add_argument("--size", type=int, default=60, help="documents per collection")
    parser.add_argument(
        "--reuse", action="store_true", help=f"replay the evidence kept in {EVIDENCE}"
    )
    parser.add_argument("--out", type=Path, help="write the figures to this JSON file")
    typo_options(parser)
    args = parser.parse_args()
    kept = evidence_path(EVIDENCE, args.typo_weight)
    if args.reuse:
        data = json.loads(kept.read_text())
    else:
        folders = judged_datasets()
        data = asyncio.run(gather(folders, args.questions, args.size, args.typo_weight))
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(json.dumps(data))
    text, figures = report(data, Scale(*load_settings().cosine_scale(None)))
    print(text)
    if args.out is not None:
        args.out.write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
