"""What the relevance evidence can do: answers' on-topic refusals against off-topic ones.

    python -m bench.relevance_frontier [--small] [--fitted] [--joint] [--out FILE]

Reads the evidence `bench.threshold` keeps (with `--small`, `bench.threshold_small`'s): each
judged question's weighed chunks with cosine and word coverage, on-topic and against the other
subjects' collections. Replays answers (the first 10 fused chunks weighed, threshold 0.25,
`cari.search.relevance.keep`) on one cosine scale of the configured width (0.18 by default) at
each floor of a grid, for each kind of cosine:

- alpha 0, the raw cosine, as the engine weighed it before it read the word coverage beside
  it (every mode but `--fitted --joint` reads the cosine alone);
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

`--joint` replays, on one scale, the cosine and the word coverage read together: the dense
curve reads `cosine + lambda * coverage` (the lexical curve stays), for each lambda of a grid.
Each lambda's floor is the lowest (steps of 0.0005) at which the tuning sets refuse at least as
many off-topic questions as the raw cosine at the configured floor; the lambda chosen is the one
with the fewest tuning on-topic refusals there. It prints each set's figures with 95 % bootstrap
intervals, and the on-topic refusals against the raw cosine's, question by question (the
difference with its interval).

`--fitted --joint` chooses how the engine reads the two (`cari.search.relevance`'s
`COVERAGE_LIFT` and `COVERAGE_CENTRE`), on the collections' fitted scales (the kept probes carry
cosines alone: the centre is what keeps the fit's placement meaningful), in full and in small
collections at once (both evidences; `--small` is ignored). For each lift, the centre is the
lowest at which every size's tuning sets refuse at least as many off-topic questions as the
cosine alone; the lift chosen has the fewest on-topic tuning refusals (the sizes' shares
averaged), then the most off-topic ones. It prints each size's figures against the cosine
alone's, question by question.

`--fitted` replays the answers as the server weighs them instead, on each collection's fitted
scale (`cari.search.fit.place`, the shipped placement, from the configured floor of the grid),
the probes shifted as the questions are: each pseudo-question by its own baseline, each bundled
question by its baseline against the other bundled ones. The baselines are centred on the
bundled questions' own mean (a constant of the model, as a server would need), not the run's.
For each kind it prints the floor at which the tuning sets refuse at least as many off-topic
questions as the raw cosine at the configured floor, with the fewest on-topic refusals there.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from bench import harness
from bench.embedding_cache import CachingEmbedder
from bench.harness import DATASETS, load_queries, resampled_means
from bench.search_ranks import ANSWER_WEIGHED, THRESHOLD
from bench.threshold import EVIDENCE, TUNING
from bench.threshold import fitted as placed
from bench.threshold_small import EVIDENCE as SMALL_EVIDENCE
from cari.embed import LocalEmbedder
from cari.search import fit
from cari.search.relevance import Evidence, Scale, keep
from cari.settings import load_settings

FLOORS = [round(0.76 + 0.005 * i, 3) for i in range(11)]
ALPHAS = (0.0, 0.25, 0.5, 1.0)  # shares of the everyday baseline taken off the cosine; 0: raw
FITTED_MOVES = [round(-0.01 + 0.005 * i, 3) for i in range(15)]  # from the configured floor
JOINTS = (0.05, 0.1, 0.15, 0.2)  # coverage's weight beside the cosine (--joint)
JOINT_MOVES = [round(0.0005 * i, 4) for i in range(121)]  # from the configured floor, upwards
# Shares of the scale's width the cosine is read higher per unit of coverage (--fitted --joint).
LIFTS = (0.25, 0.5, 0.75, 1.0)
CENTRES = [round(0.005 * i, 3) for i in range(121)]  # coverage read as no lift, upwards
REPORTING = ("tydiqa-goldp-id/test", "cacm/test", "med/test", "adi/test")
RESAMPLES = 2000
SEED = 39
TARGET_OFF = 0.95


@dataclass(frozen=True, slots=True)
class Question:
    label: str  # its query set
    target: str  # the collection searched
    on_topic: bool
    cosines: np.ndarray
    coverages: np.ndarray
    specificities: np.ndarray
    baseline: float  # its mean cosine with the bundled everyday questions


@dataclass(frozen=True, slots=True)
class Yardstick:
    """The bundled everyday questions' vectors and embedder, to weigh other questions by."""

    embedder: CachingEmbedder
    vectors: np.ndarray
    own: np.ndarray  # each bundled question's baseline against the other bundled ones

    @classmethod
    def shipped(cls) -> Yardstick:
        embedder = CachingEmbedder(LocalEmbedder(threads=1))
        shipped = fit.shipped_off_topic(embedder.model_name)
        assert shipped is not None, "the bundled questions' vectors ship with the package"
        vectors = np.stack(shipped)
        count = len(vectors)
        own = ((vectors @ vectors.T).sum(axis=1) - np.einsum("ij,ij->i", vectors, vectors)) / (
            count - 1
        )
        return cls(embedder, vectors, own)

    async def baselines(self, texts: Sequence[str]) -> list[float]:
        """Each text's mean cosine (as a query) with the bundled questions."""
        vectors = await self.embedder.embed_queries(texts)
        return [float((self.vectors @ np.asarray(v, np.float32)).mean()) for v in vectors]


async def questions(data: dict[str, Any], yardstick: Yardstick) -> list[Question]:
    """Every searched question of the evidence, with its baseline."""
    texts = {label: load_queries(DATASETS / label.split("/")[0]) for label in data["runs"]}
    # A question is searched against several collections: each text is weighed once.
    asked = list(
        dict.fromkeys(
            texts[label][qid]
            for label, targets in data["runs"].items()
            for per_query in targets.values()
            for qid in per_query
        )
    )
    baselines = dict(zip(asked, await yardstick.baselines(asked), strict=True))
    found = []
    for label, targets in data["runs"].items():
        own = label.split("/")[0]
        for target, per_query in targets.items():
            for qid, hits in per_query.items():
                head = hits[:ANSWER_WEIGHED]
                found.append(
                    Question(
                        label,
                        target,
                        target == own,
                        np.array([-1.0 if h[1] is None else h[1] for h in head]),
                        np.array([h[2] for h in head]),
                        np.array([h[3] for h in head]),
                        baselines[texts[label][qid]],
                    )
                )
    return found


@dataclass(frozen=True, slots=True)
class ProbeBaselines:
    """A collection's probes (`cari.search.fit.Probes`) with each one's baseline."""

    probes: fit.Probes
    on_topic: list[float]
    off_topic: list[float]


async def probe_baselines(data: dict[str, Any], yardstick: Yardstick) -> dict[str, ProbeBaselines]:
    """Each collection's probes with their baselines: the pseudo-questions' own, the bundled
    questions' against the others."""
    found = {}
    for name, kept in data["probes"].items():
        if not kept.get("questions"):
            raise SystemExit(f"{name}: evidence without the probes' questions: gather it again")
        probes = fit.Probes(kept["on_topic"], kept["off_topic"], kept["questions"])
        own = await yardstick.baselines(probes.questions)
        found[name] = ProbeBaselines(probes, own, [float(b) for b in yardstick.own])
    return found


def fitted(
    probes: dict[str, ProbeBaselines], alpha: float, centre: float, base: Scale
) -> dict[str, Scale]:
    """Each collection's scale placed from `base` on its probes shifted by `alpha` times their
    baselines less `centre`."""
    scales = {}
    for name, found in probes.items():
        on = zip(found.probes.on_topic, found.on_topic, strict=True)
        off = zip(found.probes.off_topic, found.off_topic, strict=True)
        shifted = fit.Probes(
            [c - alpha * (b - centre) for c, b in on], [c - alpha * (b - centre) for c, b in off]
        )
        scales[name] = fit.place(shifted, base)
    return scales


@dataclass(frozen=True, slots=True)
class Reading:
    """How the dense curve reads a chunk's cosine: less `shift`, then as `Scale.relevance`
    reads it with `lift` and `centre` (lift 0: the cosine alone, as the engine weighed it
    before issue 39's coverage reading; `--joint`'s cosine + lambda x coverage is lift lambda
    / width, centre 0)."""

    shift: float = 0.0
    lift: float = 0.0
    centre: float = 0.0


def refused(question: Question, scale: Scale, reading: Reading) -> bool:
    """Whether an answer says "no information": no weighed chunk reaches the threshold."""
    scores = [
        scale.relevance(
            Evidence(cosine - reading.shift, coverage, specificity),
            lift=reading.lift,
            centre=reading.centre,
        )
        for cosine, coverage, specificity in zip(
            question.cosines, question.coverages, question.specificities, strict=True
        )
    ]
    return not any(keep(scores, THRESHOLD))


Outcomes = dict[str, list[tuple[bool, bool]]]  # group -> (on-topic?, refused?) per question


def outcomes(
    found: Sequence[Question],
    alpha: float,
    centre: float,
    scale_of: Callable[[str], Scale],
    reading: Reading = Reading(),
) -> Outcomes:
    """Per query set (and the tuning sets, the reporting sets, all sets): each question's
    refusal, its cosines shifted by `alpha` times its baseline less `centre` and read as
    `reading` says, on its collection's scale."""
    groups: Outcomes = {}
    for q in found:
        shifted = replace(reading, shift=alpha * (q.baseline - centre))
        outcome = (q.on_topic, refused(q, scale_of(q.target), shifted))
        kind = "tuning sets" if q.label in TUNING else "reporting sets"
        names = [q.label, "all sets"] + ([kind] if q.label in TUNING + REPORTING else [])
        for name in names:
            groups.setdefault(name, []).append(outcome)
    return groups


def rates(groups: Outcomes) -> dict[str, dict[str, float]]:
    found = {}
    for name, pairs in groups.items():
        on = [r for o, r in pairs if o]
        off = [r for o, r in pairs if not o]
        found[name] = {
            "on_topic_refused": float(np.mean(on)) if on else 0.0,
            "off_topic_refused": float(np.mean(off)) if off else 1.0,
        }
    return found


def interval(flags: Sequence[bool]) -> str:
    """The share of true flags with its 95 % bootstrap interval ("—" without flags)."""
    if not flags:
        return "—"
    values = [float(flag) for flag in flags]
    means = resampled_means(values, RESAMPLES, np.random.default_rng(SEED))
    low, high = np.quantile(means, [0.025, 0.975])
    return f"{np.mean(values):.1%} [{low:.1%}, {high:.1%}]"


def print_intervals(groups: Outcomes, indent: str) -> None:
    """Each group's on-topic and off-topic refusals with their 95 % bootstrap intervals."""
    for label, pairs in groups.items():
        on = [r for o, r in pairs if o]
        off = [r for o, r in pairs if not o]
        print(f"{indent}{label:<22} on-topic {interval(on):>22}   off-topic {interval(off):>22}")


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


def global_scale(found: Sequence[Question], width: float) -> dict[str, Any]:
    """Every kind on one scale at each floor of the grid: the chosen floor and the grid."""
    centre = float(np.mean([q.baseline for q in found]))  # the run's
    report: dict[str, Any] = {}

    def everywhere(scale: Scale) -> Callable[[str], Scale]:
        return lambda _: scale

    for alpha in ALPHAS:
        name = f"everyday alpha {alpha}" if alpha else "raw"
        grid = {
            f: rates(outcomes(found, alpha, centre, everywhere(Scale(f, round(f + width, 3)))))
            for f in FLOORS
        }
        tuning = {f: r["tuning sets"]["off_topic_refused"] for f, r in grid.items()}
        meeting = [f for f, refused_share in tuning.items() if refused_share >= TARGET_OFF]
        chosen = min(meeting) if meeting else max(FLOORS)
        print(line(f"{name}, floor {chosen} (chosen on the tuning sets)", grid[chosen]))
        for f, found_rates in grid.items():
            print("   " + line(f"floor {f}", found_rates))
        print()
        report[name] = {"chosen_floor": chosen, "grid": {str(f): r for f, r in grid.items()}}
    return report


def fitted_scales(
    found: Sequence[Question],
    probes: dict[str, ProbeBaselines],
    centre: float,
    floor: float,
    width: float,
) -> dict[str, Any]:
    """Every kind on the collections' fitted scales, placed from each floor of the grid."""
    floors = [round(floor + move, 3) for move in FITTED_MOVES]

    def run(alpha: float, f: float) -> Outcomes:
        scales = fitted(probes, alpha, centre, Scale(f, round(f + width, 3)))
        return outcomes(found, alpha, centre, scales.__getitem__)

    reference = rates(run(0.0, floor))["tuning sets"]["off_topic_refused"]
    print(
        f"raw cosine at the configured floor {floor}: tuning sets' off-topic refused "
        f"{reference:.1%}\n"
    )
    report: dict[str, Any] = {}
    for alpha in ALPHAS:
        name = f"everyday alpha {alpha}" if alpha else "raw"
        runs = {f: run(alpha, f) for f in floors}
        grid = {f: rates(r) for f, r in runs.items()}
        meeting = [
            f for f in floors if grid[f]["tuning sets"]["off_topic_refused"] >= reference - 1e-9
        ]
        chosen = min(
            meeting or floors,
            key=lambda f: (
                grid[f]["tuning sets"]["on_topic_refused"],
                -grid[f]["tuning sets"]["off_topic_refused"],
            ),
        )
        print(line(f"{name}, floor {chosen} (chosen on the tuning sets)", grid[chosen]))
        print_intervals(runs[chosen], "   ")
        for f, found_rates in grid.items():
            print("   " + line(f"floor {f}", found_rates))
        print()
        report[name] = {"chosen_floor": chosen, "grid": {str(f): r for f, r in grid.items()}}
    return report


def joint_scale(found: Sequence[Question], floor: float, width: float) -> dict[str, Any]:
    """The cosine and the coverage read together on one scale, against the raw cosine at the
    configured floor."""

    def run(joint: float, f: float) -> Outcomes:
        scale = Scale(f, round(f + width, 4))
        return outcomes(found, 0.0, 0.0, lambda _: scale, Reading(lift=joint / width))

    raw = run(0.0, floor)
    reference = rates(raw)["tuning sets"]["off_topic_refused"]
    print(line(f"raw cosine at the configured floor {floor}", rates(raw)) + "\n")
    report: dict[str, Any] = {"raw": {"floor": floor, "rates": rates(raw)}}
    chosen: dict[float, tuple[float, Outcomes]] = {}
    for joint in JOINTS:
        for move in JOINT_MOVES:
            runs = run(joint, round(floor + move, 4))
            if rates(runs)["tuning sets"]["off_topic_refused"] >= reference - 1e-9:
                chosen[joint] = (round(floor + move, 4), runs)
                break
    for joint, (f, runs) in chosen.items():
        print(line(f"cosine + {joint} x coverage, floor {f}", rates(runs)))
        print_intervals(runs, "   ")
        for group in ("tuning sets", "reporting sets", "cacm/test", "adi/test"):
            if group in raw:
                print("   " + paired(group, raw, runs))
        print()
        report[f"joint {joint}"] = {"floor": f, "rates": rates(runs)}
    best = min(chosen, key=lambda j: rates(chosen[j][1])["tuning sets"]["on_topic_refused"])
    print(f"chosen on the tuning sets (fewest on-topic refusals there): {best}")
    report["chosen"] = best
    return report


@dataclass(frozen=True, slots=True)
class Size:
    """One size of collections' evidence: its questions and each collection's fitted scale."""

    name: str
    found: list[Question]
    scales: dict[str, Scale]


def fitted_sizes(yardstick: Yardstick, base: Scale) -> list[Size]:
    """Both evidences, full and small collections, each collection's scale placed from `base`
    as the server places it."""
    sizes = []
    for name, source in (("full collections", EVIDENCE), ("small collections", SMALL_EVIDENCE)):
        data = json.loads(source.read_text())
        found = asyncio.run(questions(data, yardstick))
        print(f"{name}: {len(found)} searched questions from {source}")
        sizes.append(Size(name, found, placed(data, base, fit.PLACEMENT)))
    print()
    return sizes


def joint_fitted(sizes: Sequence[Size]) -> dict[str, Any]:
    """The cosine read with the word coverage (`Scale.relevance`'s lift and centre) on the
    collections' fitted scales, in every size at once, against the cosine alone there."""
    raw = {size.name: outcomes(size.found, 0.0, 0.0, size.scales.__getitem__) for size in sizes}
    reference = {name: rates(r)["tuning sets"]["off_topic_refused"] for name, r in raw.items()}
    report: dict[str, Any] = {}
    for size in sizes:
        print(line(f"{size.name}, the cosine alone", rates(raw[size.name])))
        report[size.name] = {"cosine alone": rates(raw[size.name])}
    print()

    def run(size: Size, reading: Reading) -> Outcomes:
        return outcomes(size.found, 0.0, 0.0, size.scales.__getitem__, reading)

    chosen: dict[float, tuple[Reading, dict[str, Outcomes]]] = {}
    for lift in LIFTS:
        for centre in CENTRES:
            reading = Reading(lift=lift, centre=centre)
            runs = {size.name: run(size, reading) for size in sizes}
            if all(
                rates(runs[name])["tuning sets"]["off_topic_refused"] >= reference[name] - 1e-9
                for name in runs
            ):
                chosen[lift] = (reading, runs)
                break
    for lift, (reading, runs) in chosen.items():
        print(f"lift {lift}, centre {reading.centre} (the lowest at which every size's tuning")
        print("sets refuse as many off-topic questions as the cosine alone):")
        for size in sizes:
            found = runs[size.name]
            print("  " + line(size.name, rates(found)))
            print_intervals(found, "     ")
            for group in ("tuning sets", "reporting sets", "all sets", "cacm/test", "adi/test"):
                if group in found:
                    print("     " + paired(group, raw[size.name], found))
            report[size.name][f"lift {lift}"] = {"centre": reading.centre, "rates": rates(found)}
        print()

    def tuning(lift: float) -> tuple[float, float]:
        """The sizes' mean share of on-topic tuning questions refused, then of off-topic ones
        (less is better): each size weighs the same, as the targets hold for each."""
        found = [rates(runs)["tuning sets"] for runs in chosen[lift][1].values()]
        on = float(np.mean([r["on_topic_refused"] for r in found]))
        off = float(np.mean([r["off_topic_refused"] for r in found]))
        return round(on, 9), -round(off, 9)

    for lift in chosen:
        on_share, off_share = tuning(lift)
        print(
            f"lift {lift}: tuning sets' refusals, mean of the sizes: on-topic {on_share:.2%}, "
            f"off-topic {-off_share:.2%}"
        )
    best = min(chosen, key=tuning)
    print(
        f"chosen on the tuning sets (the fewest on-topic refusals, then the most off-topic "
        f"ones): lift {best}, centre {chosen[best][0].centre}"
    )
    report["chosen"] = {"lift": best, "centre": chosen[best][0].centre}
    return report


def paired(group: str, before: Outcomes, after: Outcomes) -> str:
    """A group's on-topic refusals after against before, question by question: the difference
    with its 95 % bootstrap interval, and how many questions moved each way."""
    was = np.array([r for o, r in before[group] if o], dtype=float)
    now = np.array([r for o, r in after[group] if o], dtype=float)
    means = resampled_means(list(now - was), RESAMPLES, np.random.default_rng(SEED))
    low, high = np.quantile(means, [0.025, 0.975])
    return (
        f"{group}: on-topic refused {was.mean():.1%} -> {now.mean():.1%}, difference "
        f"{now.mean() - was.mean():+.1%} [{low:+.1%}, {high:+.1%}]; newly refused "
        f"{int(((now == 1) & (was == 0)).sum())}, no longer {int(((was == 1) & (now == 0)).sum())}"
    )


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument(
        "--small", action="store_true", help=f"bench.threshold_small's evidence ({SMALL_EVIDENCE})"
    )
    parser.add_argument(
        "--fitted", action="store_true", help="on the collections' fitted scales, probes shifted"
    )
    parser.add_argument(
        "--joint", action="store_true", help="the cosine and the word coverage read together"
    )
    parser.add_argument("--out", type=Path, help="write the figures to this JSON file")
    args = parser.parse_args()
    yardstick = Yardstick.shipped()
    floor, ceiling = load_settings().cosine_scale(None)
    width = round(ceiling - floor, 3)  # the configured scale's
    if args.fitted and args.joint:
        report = joint_fitted(fitted_sizes(yardstick, Scale(floor, ceiling)))
    else:
        source = SMALL_EVIDENCE if args.small else EVIDENCE
        data = json.loads(source.read_text())
        found = asyncio.run(questions(data, yardstick))
        print(f"{len(found)} searched questions from {source}\n")
        if args.fitted:
            probes = asyncio.run(probe_baselines(data, yardstick))
            centre = float(yardstick.own.mean())
            mean = np.mean([q.baseline for q in found if q.on_topic])
            print(f"baselines: bundled questions' {centre:.4f}, on-topic questions' {mean:.4f}")
            report = fitted_scales(found, probes, centre, floor, width)
        elif args.joint:
            report = joint_scale(found, floor, width)
        else:
            report = global_scale(found, width)
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
