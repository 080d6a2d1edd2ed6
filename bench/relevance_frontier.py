"""What the relevance evidence can do: answers' on-topic refusals against off-topic ones.

    python -m bench.relevance_frontier [--small] [--out FILE]

Reads the evidence `bench.threshold` keeps (with `--small`, `bench.threshold_small`'s): each
judged question's weighed chunks with cosine and word coverage, on-topic and against the other
subjects' collections. Replays answers (the first 10 fused chunks weighed, threshold 0.25,
`cari.search.relevance.keep`) on one cosine scale of the configured width (0.18 by default) at
each floor of a grid, for each kind of cosine:

- alpha 0, the raw cosine, as the engine weighs it today;
- alpha above 0: the cosine less `alpha` times the question's own baseline, its mean cosine (query
  to query) with the bundled everyday questions (`cari.search.fit`), centred on that mean over
  every question of the run. A question that sits close to everything (long, generic wording)
  then needs a closer chunk, one that sits far from everything less.

For each kind it prints the floor chosen on the tuning sets (the lowest that refuses 95 % of
their off-topic questions) with every set's figures there, and the frontier: at each floor, the
share of all off-topic questions refused against each set's on-topic questions refused. Issue
39 asks for both at once: at least 95 % of off-topic questions refused, at most 3 % of each
reporting set's on-topic ones. Query vectors come from `bench.quality`'s on-disk cache (the
questions `bench.threshold` searched are there); the bundled questions' from the package.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench import harness
from bench.embedding_cache import CachingEmbedder
from bench.harness import DATASETS, load_queries
from bench.search_ranks import ANSWER_WEIGHED, THRESHOLD
from bench.threshold import EVIDENCE, TUNING
from bench.threshold_small import EVIDENCE as SMALL_EVIDENCE
from cari.embed import LocalEmbedder
from cari.search import fit
from cari.search.relevance import Scale, keep, lexical
from cari.settings import load_settings

FLOORS = [round(0.76 + 0.005 * i, 3) for i in range(11)]
ALPHAS = (0.0, 0.5, 1.0)  # shares of the everyday baseline taken off the cosine; 0: raw
TARGET_OFF = 0.95


@dataclass(frozen=True, slots=True)
class Question:
    label: str  # its query set
    on_topic: bool
    cosines: np.ndarray
    coverages: np.ndarray
    baseline: float  # its mean cosine with the bundled everyday questions


async def questions(data: dict[str, Any]) -> list[Question]:
    """Every searched question of the evidence, with its baseline."""
    embedder = CachingEmbedder(LocalEmbedder(threads=1))
    shipped = fit.shipped_off_topic(embedder.model_name)
    assert shipped is not None, "the bundled questions' vectors ship with the package"
    everyday = np.stack(shipped)
    baselines: dict[str, float] = {}  # a question is searched against several collections

    async def baseline(text: str) -> float:
        if text not in baselines:
            vector = np.asarray(await embedder.embed_query(text), dtype=np.float32)
            baselines[text] = float((everyday @ vector).mean())
        return baselines[text]

    found = []
    for label, targets in data["runs"].items():
        texts = load_queries(DATASETS / label.split("/")[0])
        for target, per_query in targets.items():
            for qid, hits in per_query.items():
                head = hits[:ANSWER_WEIGHED]
                found.append(
                    Question(
                        label,
                        target == label.split("/")[0],
                        np.array([-1.0 if h[1] is None else h[1] for h in head]),
                        np.array([h[2] for h in head]),
                        await baseline(texts[qid]),
                    )
                )
    return found


def refused(question: Question, scale: Scale, shift: float) -> bool:
    """Whether an answer says "no information": no weighed chunk reaches the threshold."""
    scores = [
        max(scale.dense(cosine - shift), lexical(coverage))
        for cosine, coverage in zip(question.cosines, question.coverages, strict=True)
    ]
    return not any(keep(scores, THRESHOLD))


def figures(
    found: Sequence[Question], alpha: float, floor: float, width: float
) -> dict[str, dict[str, float]]:
    """Per query set (and the tuning sets, all sets): on- and off-topic refusal rates on the
    scale from `floor` `width` wide."""
    centre = float(np.mean([q.baseline for q in found]))
    scale = Scale(floor, round(floor + width, 3))
    groups: dict[str, list[tuple[bool, bool]]] = {}
    for q in found:
        shift = alpha * (q.baseline - centre)
        outcome = (q.on_topic, refused(q, scale, shift))
        names = [q.label, "all sets"] + (["tuning sets"] if q.label in TUNING else [])
        for name in names:
            groups.setdefault(name, []).append(outcome)
    rates = {}
    for name, outcomes in groups.items():
        on = [r for o, r in outcomes if o]
        off = [r for o, r in outcomes if not o]
        rates[name] = {
            "on_topic_refused": float(np.mean(on)) if on else 0.0,
            "off_topic_refused": float(np.mean(off)) if off else 1.0,
        }
    return rates


def line(name: str, rates: dict[str, dict[str, float]]) -> str:
    cells = " ".join(
        f"{label.split('/')[0][:5]}{'/' + label.split('/')[1][:3] if 'tydi' in label else ''}"
        f" {r['on_topic_refused']:.1%}"
        for label, r in rates.items()
        if "sets" not in label
    )
    return (
        f"{name}: off-topic refused {rates['all sets']['off_topic_refused']:.1%} "
        f"(tuning {rates['tuning sets']['off_topic_refused']:.1%}); on-topic refused: {cells}"
    )


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument(
        "--small", action="store_true", help=f"bench.threshold_small's evidence ({SMALL_EVIDENCE})"
    )
    parser.add_argument("--out", type=Path, help="write the figures to this JSON file")
    args = parser.parse_args()
    source = SMALL_EVIDENCE if args.small else EVIDENCE
    found = asyncio.run(questions(json.loads(source.read_text())))
    print(f"{len(found)} searched questions from {source}\n")
    floor, ceiling = load_settings().cosine_scale(None)
    width = round(ceiling - floor, 3)  # the configured scale's
    report: dict[str, Any] = {}
    for alpha in ALPHAS:
        name = f"everyday alpha {alpha}" if alpha else "raw"
        grid = {floor: figures(found, alpha, floor, width) for floor in FLOORS}
        tuning = {f: r["tuning sets"]["off_topic_refused"] for f, r in grid.items()}
        meeting = [f for f, refused_share in tuning.items() if refused_share >= TARGET_OFF]
        chosen = min(meeting) if meeting else max(FLOORS)
        print(line(f"{name}, floor {chosen} (chosen on the tuning sets)", grid[chosen]))
        for floor, rates in grid.items():
            print("   " + line(f"floor {floor}", rates))
        print()
        report[name] = {"chosen_floor": chosen, "grid": {str(f): r for f, r in grid.items()}}
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
