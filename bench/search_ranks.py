"""Search ranks, answers refuse (issue 39): the defaults replayed from the threshold evidence.

    python -m bench.search_ranks [--small] [--grid] [--companions] [--bands] [--typo-weight W]
                                 [--out FILE]

Reads the evidence `bench.threshold` keeps (with `--small`, `bench.threshold_small`'s; with
`--typo-weight`, the evidence gathered at that typo tolerance): each
judged question's weighed chunks (document, cosine, term coverage, in fused order) searched
against its own collection and against the other subjects' collections. Replays it on each
collection's fitted scale, as the server weighs it (`cari.search.fit`, the shipped placement):

- **search at the defaults**: the top 10 ranked, no cut; empty only when nothing was
  retrieved. Against the previous default, the cut at the collection's threshold (0.25):
  questions with no result, and nDCG@10;
- **answers at the collection's threshold** (0.25, top k 5: the engine weighs the first
  max(2·5, 10) fused chunks): the share of on-topic questions answered with the no-information
  sentence, and of off-topic ones (the refusal rate), each with a 95 % bootstrap interval over
  its questions (off-topic: question and collection pairs); and nDCG@10 of what passes against
  the same list uncut;
- each relevance on the same evidence: `before` (the previous formula, linear, word coverage
  gated at 0.6: the same-run baseline), `cosine alone` (the curves before the dense one read
  the word coverage beside the cosine), `max` (the shipped curves, the larger of the two) and
  `either` (the curves' probabilistic sum: 1 - (1 - dense)(1 - lexical)).

Tuning sets (TyDi dev, Cranfield, CISI) and reporting sets (TyDi test, CACM, MED, ADI) are
reported apart; nothing is chosen on the reporting sets. `--grid` replays, on the tuning sets
only, other places for the word-coverage curve (relevance 0.25 at coverage 0.5 to 0.7) with
either combination, for the answers' no-information rates. `--bands` counts the on-topic
results in each band and the share of them relevant, with the coverage curve capped by the words'
specificity (shipped) and uncapped (the same-run baseline), and the share relevant by
specificity among the results holding 80 % or more of their question's words, where the cap's
curve was placed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from bench import harness
from bench.harness import DATASETS, load_qrels, resampled_means
from bench.quality import document_ranking, evaluate
from bench.threshold import EVIDENCE, TUNING, evidence_path, fitted, typo_options
from bench.threshold_small import EVIDENCE as SMALL_EVIDENCE
from cari.search import fit
from cari.search.relevance import Evidence, Scale, band, curve, keep
from cari.settings import load_settings

THRESHOLD = 0.25  # the collection's default: what answers apply
ANSWER_WEIGHED = 10  # chunks the engine weighs for an answer's top k 5
ANSWER_TOP_K = 5  # an answer's sources: the first this many that a threshold keeps
TOP = 10  # a search's results, as nDCG@10 reads them
RESAMPLES = 2000
SEED = 39

Hits = Sequence[tuple[str, float | None, float, float]]  # document, cosine, coverage, specificity
Relevance = Callable[[Scale, Evidence], float]


def before(scale: Scale, evidence: Evidence) -> float:
    """The relevance until issue 39: linear and clipped, coverage counted from 0.6 up."""
    dense = 0.0
    if evidence.cosine is not None:
        width = scale.cosine_ceiling - scale.cosine_floor
        dense = min(1.0, max(0.0, (evidence.cosine - scale.cosine_floor) / width))
    return max(dense, min(1.0, max(0.0, (evidence.coverage - 0.6) / 0.4)))


VARIANTS: dict[str, Relevance] = {
    "before": before,
    "cosine alone": lambda s, e: s.relevance(e, "max", lift=0.0),
    "max, words uncapped": lambda s, e: s.relevance(replace(e, specificity=math.inf), "max"),
    "max": lambda s, e: s.relevance(e, "max"),
    "either": lambda s, e: s.relevance(e, "either"),
}


def variant(quarter: float, combine: str) -> Relevance:
    """The shipped dense curve with the coverage curve through 0.25 at `quarter` (0.5 at
    `quarter` + 0.1), combined by the larger or by the probabilistic sum."""

    def relevance(scale: Scale, evidence: Evidence) -> float:
        dense = scale.dense(evidence)
        lexical = curve(evidence.coverage, quarter, quarter + 0.1)
        return max(dense, lexical) if combine == "max" else 1 - (1 - dense) * (1 - lexical)

    return relevance


def grid(data: dict[str, Any], labels: Sequence[str], scales: dict[str, Scale]) -> str:
    """Answers' no-information rates on `labels` for each coverage curve and combination."""
    lines = ["answers on the tuning sets by coverage curve (relevance 0.25 at) and combination:"]
    lines.append(
        f"  {'curve':<12} {'on-topic no information':>26} {'off-topic no information':>26}"
    )
    for quarter in (0.5, 0.55, 0.6, 0.65, 0.7):
        for combine in ("max", "either"):
            relevance = variant(quarter, combine)
            on: list[bool] = []
            off: list[bool] = []
            for label in labels:
                own = label.split("/")[0]
                for target, per_query in data["runs"][label].items():
                    refused = [
                        not passing(h, scales[target], relevance, ANSWER_WEIGHED)
                        for h in per_query.values()
                    ]
                    (on if target == own else off).extend(refused)
            lines.append(
                f"  {quarter:<5} {combine:<6} {percent(interval(on)):>26} "
                f"{percent(interval(off)):>26}"
            )
    return "\n".join(lines)


def passing(hits: Hits, scale: Scale, relevance: Relevance, depth: int) -> list[str]:
    """The documents a threshold of 0.25 keeps of the first `depth` weighed chunks."""
    head = list(hits)[:depth]
    scores = [relevance(scale, Evidence(c, v, s)) for _, c, v, s in head]
    return [hit[0] for hit, ok in zip(head, keep(scores, THRESHOLD), strict=True) if ok]


SUPPORTS = (0.5, 0.75, 1.0)  # the shipped companion rule (relevance.SUPPORT), and stricter


def companions(
    data: dict[str, Any], groups: dict[str, list[str]], scales: dict[str, Scale]
) -> tuple[str, dict[str, Any]]:
    """What the companion rule lets into answers: at each share of the threshold a chunk
    beside one that reaches it needs (`SUPPORTS`), on the answered on-topic questions the
    sources (the documents of the first `ANSWER_TOP_K` chunks that pass, of the first
    `ANSWER_WEIGHED` weighed), the share of them relevant (precision, by the qrels), the share
    of the relevant documents of the weighed chunks among them (recall), and nDCG@10 of them
    against the weighed list uncut; on the answered off-topic questions, the sources (all
    irrelevant). Refusals do not move: a question is refused when no
    chunk reaches the threshold, whatever the companions need."""
    relevance = VARIANTS["max"]
    figures: dict[str, Any] = {}
    lines = [
        "answers by what a companion needs (share of the threshold 0.25): answered on-topic "
        "questions' sources, precision, recall, nDCG@10 change; answered off-topic questions' "
        "sources",
        f"  {'':<22} {'needs':>6} {'on sources':>11} {'precision [95 %]':>24} "
        f"{'recall [95 %]':>24} {'nDCG@10':>9} {'off sources':>12}",
    ]
    for name, labels in groups.items():
        for support in SUPPORTS:
            sources: list[float] = []
            precision: list[float] = []
            recall: list[float] = []
            change: list[float] = []
            off_sources: list[float] = []
            for label in labels:
                own = label.split("/")[0]
                folder, split = label.split("/")
                qrels = load_qrels(DATASETS / folder, split)
                for target, per_query in data["runs"][label].items():
                    scale = scales[target]
                    for q, hits in per_query.items():
                        head = list(hits)[:ANSWER_WEIGHED]
                        scores = [relevance(scale, Evidence(c, v, s)) for _, c, v, s in head]
                        if not scores or max(scores) < THRESHOLD:
                            continue  # refused, whatever the companions need
                        kept = document_ranking(
                            [h[0] for h, r in zip(head, scores, strict=True)
                             if r >= THRESHOLD * support][:ANSWER_TOP_K]
                        )  # fmt: skip
                        if target != own:
                            off_sources.append(len(kept))
                            continue
                        relevant = {d for d, grade in qrels.get(q, {}).items() if grade > 0}
                        uncut = set(document_ranking([h[0] for h in head])) & relevant
                        sources.append(len(kept))
                        precision.append(len(set(kept) & relevant) / len(kept))
                        if uncut:
                            recall.append(len(set(kept) & uncut) / len(uncut))
                        scored = evaluate({q: qrels[q]}, {q: kept[:TOP]}, TOP)[q]["nDCG@10"]
                        base = evaluate(
                            {q: qrels[q]}, {q: document_ranking([h[0] for h in head])[:TOP]}, TOP
                        )[q]["nDCG@10"]
                        change.append(scored - base)
            kept_precision, kept_recall = mean_interval(precision), mean_interval(recall)
            on_mean = float(np.mean(sources)) if sources else float("nan")
            off_mean = float(np.mean(off_sources)) if off_sources else float("nan")
            ndcg_change = float(np.mean(change)) if change else float("nan")
            figures.setdefault(name, {})[str(support)] = {
                "answered_on_topic": len(sources),
                "on_topic_sources": on_mean,
                "precision": kept_precision,
                "recall": kept_recall,
                "ndcg10_change": ndcg_change,
                "answered_off_topic": len(off_sources),
                "off_topic_sources": off_mean,
            }
            lines.append(
                f"  {name:<22} {support:>6} {on_mean:>11.2f} {ratio(kept_precision):>24} "
                f"{ratio(kept_recall):>24} {ndcg_change:>+9.4f} {off_mean:>12.2f}"
            )
    return "\n".join(lines), figures


BAND_VARIANTS = ("max, words uncapped", "max")  # the same-run baseline, then the shipped


def bands(
    data: dict[str, Any], groups: dict[str, list[str]], scales: dict[str, Scale]
) -> tuple[str, dict[str, Any]]:
    """What each band holds: of the on-topic questions' first `TOP` results (searches at the
    defaults: no cut), how many fall in each band and the share of them that are relevant (by
    the qrels, a chunk standing for its document), for the relevance before the words'
    specificity capped their curve and for the shipped one."""
    figures: dict[str, Any] = {}
    lines = [
        "bands of on-topic results (first 10): results in the band, share relevant [95 %]",
        f"  {'':<22} {'relevance':<20} "
        + " ".join(f"{name:>34}" for name in ("strong", "moderate", "weak")),
    ]
    for name, labels in groups.items():
        for variant_name in BAND_VARIANTS:
            relevance = VARIANTS[variant_name]
            held: dict[str, list[bool]] = {"strong": [], "moderate": [], "weak": []}
            for label in labels:
                folder, split = label.split("/")
                if folder not in data["runs"][label]:
                    continue
                qrels = load_qrels(DATASETS / folder, split)
                scale = scales[folder]
                for q, hits in data["runs"][label][folder].items():
                    relevant = {d for d, grade in qrels.get(q, {}).items() if grade > 0}
                    for document, c, v, s in list(hits)[:TOP]:
                        score = relevance(scale, Evidence(c, v, s))
                        held[band(score)].append(document in relevant)
            figures.setdefault(name, {})[variant_name] = {
                k: {"results": len(flags), "relevant": interval(flags)} for k, flags in held.items()
            }
            lines.append(
                f"  {name:<22} {variant_name:<20} "
                + " ".join(
                    f"{len(flags):>6} {percent(interval(flags)):>27}" for flags in held.values()
                )
            )
    return "\n".join(lines), figures


SPECIFICITY_BINS = ((-math.inf, -2.0), (-2.0, -1.0), (-1.0, 0.0), (0.0, 1.0), (1.0, 2.0),
                    (2.0, 4.0), (4.0, 8.0), (8.0, math.inf))  # fmt: skip


def specificity(data: dict[str, Any], groups: dict[str, list[str]]) -> tuple[str, dict[str, Any]]:
    """Where the words' specificity puts the coverage curve's cap: of the on-topic questions'
    first `TOP` results holding 80 % or more of their question's words (coverage relevance 0.5
    and above), the share relevant (by the qrels) in each band of specificity."""
    figures: dict[str, Any] = {}
    lines = [
        "on-topic results holding >= 80 % of the question's words: share relevant "
        "by the words' specificity",
        f"  {'':<22} "
        + " ".join(f"{f'[{low:g}, {high:g})':>18}" for low, high in SPECIFICITY_BINS),
    ]
    for name, labels in groups.items():
        binned: list[list[bool]] = [[] for _ in SPECIFICITY_BINS]
        for label in labels:
            folder, split = label.split("/")
            if folder not in data["runs"][label]:
                continue
            qrels = load_qrels(DATASETS / folder, split)
            for q, hits in data["runs"][label][folder].items():
                relevant = {d for d, grade in qrels.get(q, {}).items() if grade > 0}
                for document, _, coverage, specific in list(hits)[:TOP]:
                    if coverage < 0.8:
                        continue
                    for flags, (low, high) in zip(binned, SPECIFICITY_BINS, strict=True):
                        if low <= specific < high:
                            flags.append(document in relevant)
        figures[name] = [
            {"from": low, "to": high, "results": len(flags), "relevant": interval(flags)}
            for (low, high), flags in zip(SPECIFICITY_BINS, binned, strict=True)
        ]
        lines.append(
            f"  {name:<22} "
            + " ".join(
                f"{len(flags):>5} {'—' if not flags else f'{sum(flags) / len(flags):.0%}':>12}"
                for flags in binned
            )
        )
    return "\n".join(lines), figures


def mean_interval(values: Sequence[float]) -> tuple[float, float, float]:
    """The mean and its 95 % bootstrap interval."""
    if not values:
        return (float("nan"),) * 3
    means = resampled_means(list(values), RESAMPLES, np.random.default_rng(SEED))
    low, high = np.quantile(means, [0.025, 0.975])
    return float(np.mean(values)), float(low), float(high)


def ratio(figure: tuple[float, float, float]) -> str:
    share, low, high = figure
    if share != share:
        return "—"
    return f"{share:.3f} [{low:.3f}, {high:.3f}]"


def interval(flags: Sequence[bool]) -> tuple[float, float, float]:
    """The share of true flags and its 95 % bootstrap interval."""
    if not flags:
        return (float("nan"),) * 3
    values = [float(flag) for flag in flags]
    means = resampled_means(values, RESAMPLES, np.random.default_rng(SEED))
    low, high = np.quantile(means, [0.025, 0.975])
    return float(np.mean(values)), float(low), float(high)


def ndcg(label: str, rankings: dict[str, list[str]]) -> float:
    folder, split = label.split("/")
    qrels = load_qrels(DATASETS / folder, split)
    judged = {q: qrels[q] for q in rankings}
    scored = evaluate(judged, {q: docs[:TOP] for q, docs in rankings.items()}, TOP)
    return float(np.mean([scored[q]["nDCG@10"] for q in rankings]))


def measure(
    data: dict[str, Any], labels: Sequence[str], scales: dict[str, Scale]
) -> dict[str, Any]:
    """The figures of these query sets (their questions pooled)."""
    on: dict[str, list[bool]] = {name: [] for name in VARIANTS}
    off: dict[str, list[bool]] = {name: [] for name in VARIANTS}
    search_empty_now: list[bool] = []
    search_empty_before: list[bool] = []
    ndcg_now: list[float] = []
    ndcg_cut: list[float] = []
    answer_ndcg: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for label in labels:
        own = label.split("/")[0]
        for target, per_query in data["runs"][label].items():
            scale = scales[target]
            for name, relevance in VARIANTS.items():
                refused = [
                    not passing(h, scale, relevance, ANSWER_WEIGHED) for h in per_query.values()
                ]
                (on if target == own else off)[name] += refused
            if target != own:
                continue
            ranked = {q: document_ranking([h[0] for h in hits]) for q, hits in per_query.items()}
            cut = {
                q: document_ranking(passing(hits, scale, before, 2 * TOP))
                for q, hits in per_query.items()
            }
            search_empty_now += [not docs for docs in ranked.values()]
            search_empty_before += [not docs for docs in cut.values()]
            weight = len(per_query)
            ndcg_now += [ndcg(label, ranked)] * weight
            ndcg_cut += [ndcg(label, cut)] * weight
            answer_base = {
                q: document_ranking([h[0] for h in hits][:ANSWER_WEIGHED])
                for q, hits in per_query.items()
            }
            base = ndcg(label, answer_base)
            for name, relevance in VARIANTS.items():
                kept = {
                    q: document_ranking(passing(hits, scale, relevance, ANSWER_WEIGHED))
                    for q, hits in per_query.items()
                }
                answer_ndcg[name] += [ndcg(label, kept) - base] * weight
    return {
        "questions": len(search_empty_now),
        "search_empty": {
            "before": interval(search_empty_before),
            "now": interval(search_empty_now),
        },
        "search_ndcg10": {
            "before": float(np.mean(ndcg_cut)) if ndcg_cut else None,
            "now": float(np.mean(ndcg_now)) if ndcg_now else None,
        },
        "answers_on_topic_no_information": {n: interval(v) for n, v in on.items()},
        "answers_off_topic_no_information": {n: interval(v) for n, v in off.items()},
        "answers_ndcg10_change": {
            n: float(np.mean(v)) if v else None for n, v in answer_ndcg.items()
        },
    }


def percent(figure: tuple[float, float, float]) -> str:
    share, low, high = figure
    if share != share:  # nan: no such questions
        return "—"
    return f"{share:.1%} [{low:.1%}, {high:.1%}]"


def report(data: dict[str, Any], groups: dict[str, list[str]]) -> tuple[str, dict[str, Any]]:
    base = Scale(*load_settings().cosine_scale(None))
    scales = fitted(data, base, fit.PLACEMENT)
    figures = {name: measure(data, labels, scales) for name, labels in groups.items()}
    lines = [
        f"fitted scales ({fit.PLACEMENT}), threshold {THRESHOLD} for answers; searches at the "
        "defaults cut nothing",
        "",
        "search at the defaults: questions with no result, before (cut at 0.25) -> now; "
        "nDCG@10 before -> now",
    ]
    for name, found in figures.items():
        empty, ndcgs = found["search_empty"], found["search_ndcg10"]
        lines.append(
            f"  {name:<22} {found['questions']:>5} q  {percent(empty['before']):>24} -> "
            f"{percent(empty['now']):>22}   {ndcgs['before']:.4f} -> {ndcgs['now']:.4f}"
        )
    for side in ("on", "off"):
        lines += ["", f"answers: {side}-topic questions answered 'no information'"]
        lines.append(f"  {'':<22} " + "".join(f"{n:>26}" for n in VARIANTS))
        for name, found in figures.items():
            row = found[f"answers_{side}_topic_no_information"]
            lines.append(f"  {name:<22} " + "".join(f"{percent(row[n]):>26}" for n in VARIANTS))
    lines += ["", "answers: nDCG@10 of the sources passing 0.25 against the same list uncut"]
    lines.append(f"  {'':<22} " + "".join(f"{n:>14}" for n in VARIANTS))
    for name, found in figures.items():
        row = found["answers_ndcg10_change"]
        lines.append(f"  {name:<22} " + "".join(f"{row[n]:>+14.4f}" for n in VARIANTS))
    return "\n".join(lines), figures


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument(
        "--small", action="store_true", help=f"bench.threshold_small's evidence ({SMALL_EVIDENCE})"
    )
    parser.add_argument("--grid", action="store_true", help="the coverage curves on tuning sets")
    parser.add_argument(
        "--companions", action="store_true", help="what answers keep beside a passing chunk"
    )
    parser.add_argument(
        "--bands", action="store_true", help="what each band holds, the words capped or not"
    )
    parser.add_argument("--out", type=Path, help="write the figures to this JSON file")
    typo_options(parser)
    args = parser.parse_args()
    source = evidence_path(SMALL_EVIDENCE if args.small else EVIDENCE, args.typo_weight)
    data = json.loads(source.read_text())
    labels = list(data["runs"])
    tuning = [label for label in TUNING if label in labels]
    groups = {label: [label] for label in labels}
    groups["tuning sets"] = tuning
    groups["reporting sets"] = [label for label in labels if label not in tuning]
    if args.small:
        groups["all sets"] = labels
    text, figures = report(data, groups)
    print(text)
    if args.grid:
        scales = fitted(data, Scale(*load_settings().cosine_scale(None)), fit.PLACEMENT)
        print("\n" + grid(data, tuning, scales))
    if args.companions:
        scales = fitted(data, Scale(*load_settings().cosine_scale(None)), fit.PLACEMENT)
        kept_text, figures["companions"] = companions(data, groups, scales)
        print("\n" + kept_text)
    if args.bands:
        scales = fitted(data, Scale(*load_settings().cosine_scale(None)), fit.PLACEMENT)
        bands_text, figures["bands"] = bands(data, groups, scales)
        print("\n" + bands_text)
        specific_text, figures["specificity"] = specificity(data, groups)
        print("\n" + specific_text)
    if args.out is not None:
        args.out.write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
