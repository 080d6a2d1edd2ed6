"""Fusion sweep: which method, weights, RRF k and candidate depth make hybrid search best.

    python -m bench.fusion [--tune tydiqa-goldp-id/dev cranfield/test cisi/test]
                           [--report tydiqa-goldp-id/test cacm/test med/test adi/test]
                           [--robust] [--out bench/results/fusion.json]

It needs no database and no model: it reads the keyword (BM25) and vector (HNSW) lists that
`python -m bench.quality --out ...` kept for every judged query, 100 chunks each with their
scores, in `bench/.cache/runs/<dataset>-<split>.json` (run bench.quality first, with
`--split dev` for TyDi's tuning split). Each configuration is fused by the engine's own
`cari.search.fusion.fuse` with the engine's exact-token boost (a query naming an exact token
gets `CARI_EXACT_TOKEN_KEYWORD_BOOST` x keyword and `CARI_EXACT_TOKEN_VECTOR_BOOST` x vector
weight), so a configuration scores here what the service would return with it.

- Grid: method `rrf` (k in 10, 20, 40, 60, 100) and the convex `minmax` and `zscore`; vector
  share `v` = vector_weight / (vector_weight + keyword_weight) from 0.1 to 0.9 by 0.1 (0.5 is
  equal weights); candidates per retriever 20, 40, 100 (a list's first d chunks are what the
  retriever returns for `candidates` = d: BM25 is exact, HNSW's order is the same up to its
  approximation).
- Metrics: nDCG@10 and Recall@100 of the fused list's documents (chunks -> documents at their
  best rank), by `pytrec_eval` (`bench.quality.evaluate`), on each set's judged queries.
- Choice, on the tuning sets only: the configuration with the highest mean gain in nDCG@10
  over each set's better single retriever (keyword or vector, same lists, same depth 100),
  among those that lose nowhere. The reporting sets are then scored once with that choice
  against keyword, vector and equal-weight RRF (k 60, depth 40: the previous default), and
  against two ceilings picked knowing the judgements: the oracle, each query answered by the
  better of keyword and vector for it, which bounds what any per-query choice between the two
  could gain; and the chosen method and depth at the vector share best for that set, which
  bounds what tuning the weights per collection could gain.
- Noise: each gain over the better single retriever comes with a 95 % paired bootstrap interval
  (queries resampled with replacement, each keeping both of its runs; for a mean over sets,
  each set resampled on its own), so a gain of a few thousandths on a few dozen queries reads
  as what it is.
- `--robust`: short, weak keyword lists instead, which the full sets barely have. The default
  fusion with each way of lowering such a list's weight (the engine's `weighed` at each n0 and
  s0, and for comparison: it without its strength guard, every list weighed by its top score
  over the question's BM25 ceiling, by min(1, n / m)), against the default before it, on the
  full sets and on bench.fusion_small's small collections (`<set>-small`: run it first, and
  its `--full` for the full sets' ceilings), with paired intervals per set (`robust`).
"""

from __future__ import annotations

import itertools
import json
import statistics
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from bench import harness
from bench.harness import DATASETS, Qrels, Ranking, load_qrels, load_queries, resampled_means
from bench.quality import RUNS_DIR, document_ranking, evaluate, mean_metrics
from cari.limits import Method
from cari.search import signals
from cari.search.fusion import (
    SHORT_KEYWORD_N0,
    STRONG_KEYWORD_S0,
    Candidate,
    fuse,
    weighed,
)
from cari.settings import load_settings

TUNE = ("tydiqa-goldp-id/dev", "cranfield/test", "cisi/test")
REPORT = ("tydiqa-goldp-id/test", "cacm/test", "med/test", "adi/test")
SHARES = tuple(round(0.1 * i, 1) for i in range(1, 10))
RRF_KS = (10, 20, 40, 60, 100)
DEPTHS = (20, 40, 100)
DEPTH = 100  # the lists' depth, and of Recall@100
BOOTSTRAP_ROUNDS = 10_000


@dataclass(frozen=True, slots=True)
class Config:
    method: Method
    vector_share: float
    rrf_k: int
    depth: int
    # A short, weak keyword list's weight, as the engine's `weighed` lowers it: its n0 and s0
    # (0: as given, the fusion before it). Measured beside it (0: none), on every keyword list:
    # times min(1, strength / `strength`), strength its top score over the question's BM25
    # ceiling; times min(1, n / `short`), n its length.
    length: float = SHORT_KEYWORD_N0
    guard: float = STRONG_KEYWORD_S0
    strength: float = 0.0
    short: float = 0.0

    def label(self) -> str:
        k = f" k {self.rrf_k}" if self.method == "rrf" else ""
        engine = (self.length, self.guard) != (SHORT_KEYWORD_N0, STRONG_KEYWORD_S0)
        n = f" n0 {self.length:g} s0 {self.guard:g}" if engine else ""
        s = f" strength {self.strength:g}" if self.strength else ""
        m = f" m {self.short:g}" if self.short else ""
        return f"{self.method}{k} v {self.vector_share:.1f} depth {self.depth}{n}{s}{m}"


BASELINE = Config("rrf", 0.5, 60, 40)
PerQuery = dict[str, dict[str, float]]  # query -> metric -> value, as bench.quality.evaluate


@dataclass(slots=True)
class QuerySet:
    """One dataset split: its judged queries, their lists, and the chunks' documents."""

    name: str
    qrels: Qrels
    lists: dict[str, dict[str, list[Candidate]]]  # query -> retriever -> candidates
    documents: dict[int, str]
    boosted: set[str]  # queries the signal detector finds an exact token in
    ceilings: dict[str, float]  # query -> its BM25 ceiling, where the runs kept it


def load_set(name: str, runs_dir: Path = RUNS_DIR, datasets: Path = DATASETS) -> QuerySet:
    """`dataset/split`, or `dataset/split-small` for bench.fusion_small's small collections,
    whose judgements are cut to the documents each question's collection holds."""
    dataset, split = name.split("/")
    path = runs_dir / f"{dataset}-{split}.json"
    if not path.exists():
        raise SystemExit(
            f"{path} is missing: run `python -m bench.quality --dataset "
            f"{datasets / dataset} --split {split} --out bench/results/quality.json` first"
        )
    saved = json.loads(path.read_text())
    queries = load_queries(datasets / dataset)
    qrels = load_qrels(datasets / dataset, split.removesuffix("-small"))
    held = {qid: set(docs) for qid, docs in saved.get("held", {}).items()}
    lists = {
        qid: {
            retriever: [Candidate(int(c), float(s)) for c, s in ranked]
            for retriever, ranked in by_retriever.items()
        }
        for qid, by_retriever in saved["lists"].items()
    }
    return QuerySet(
        name=name,
        qrels={
            qid: {d: g for d, g in qrels[qid].items() if qid not in held or d in held[qid]}
            for qid in lists
        },
        lists=lists,
        documents={int(c): str(d) for c, d in saved["chunk_documents"].items()},
        boosted={qid for qid in lists if signals.detect(queries[qid]).exact_tokens},
        ceilings={qid: float(c) for qid, c in saved.get("ceilings", {}).items()},
    )


def single(queries: QuerySet, retriever: str) -> Ranking:
    return {
        qid: document_ranking([queries.documents[c.chunk_id] for c in lists[retriever][:DEPTH]])
        for qid, lists in queries.lists.items()
    }


def fused(queries: QuerySet, config: Config, boosts: tuple[float, float]) -> Ranking:
    ranking: Ranking = {}
    for qid, lists in queries.lists.items():
        keyword_boost, vector_boost = boosts if qid in queries.boosted else (1.0, 1.0)
        cut = {retriever: ranked[: config.depth] for retriever, ranked in lists.items()}
        given = {
            "keyword": (1 - config.vector_share)
            * keyword_boost
            * confidence(cut["keyword"], queries.ceilings.get(qid), config),
            "vector": config.vector_share * vector_boost,
        }
        ceiling = queries.ceilings.get(qid, 0.0)
        weights = weighed(given, cut, config.depth, ceiling, config.length, config.guard)
        result = fuse(cut, weights, config.method, config.rrf_k, DEPTH)
        ranking[qid] = document_ranking([queries.documents[f.chunk_id] for f in result])
    return ranking


def confidence(keyword: list[Candidate], ceiling: float | None, config: Config) -> float:
    """The factors of a keyword list's weight measured beside the engine's (1: none)."""
    factor = 1.0
    if config.strength and ceiling and keyword:
        factor *= min(1.0, keyword[0].score / ceiling / config.strength)
    if config.short:
        factor *= min(1.0, len(keyword) / config.short)
    return factor


def oracle(keyword: PerQuery, vector: PerQuery) -> float:
    """Mean nDCG@10 with each query answered by whichever of keyword and vector scores better on
    it, picked knowing the judgements: the ceiling of any per-query choice between the two."""
    return statistics.fmean(max(keyword[q]["nDCG@10"], vector[q]["nDCG@10"]) for q in keyword)


def best_share(queries: QuerySet, config: Config, boosts: tuple[float, float]) -> dict[str, float]:
    """`config` at the vector share that scores best on this set, picked knowing the
    judgements: the ceiling of setting a collection's weights for it."""
    return max(
        (
            {
                **scores(queries, fused(queries, replace(config, vector_share=share), boosts)),
                "vector_share": share,
            }
            for share in SHARES
        ),
        key=lambda row: row["nDCG@10"],
    )


def per_query(queries: QuerySet, ranking: Ranking) -> PerQuery:
    return evaluate(queries.qrels, ranking, DEPTH)


def means(evaluated: PerQuery) -> dict[str, float]:
    mean = mean_metrics(evaluated)
    return {"nDCG@10": mean["nDCG@10"], "Recall@100": mean[f"Recall@{DEPTH}"]}


def scores(queries: QuerySet, ranking: Ranking) -> dict[str, float]:
    return means(per_query(queries, ranking))


def differences(fusion: PerQuery, keyword: PerQuery, vector: PerQuery) -> list[float]:
    """Per judged query: the fusion's nDCG@10 minus that of the set's better single retriever
    (the one with the higher mean on the set, as the targets count it)."""
    better = max((keyword, vector), key=lambda run: means(run)["nDCG@10"])
    return [fusion[q]["nDCG@10"] - better[q]["nDCG@10"] for q in fusion]


def interval(per_set: list[list[float]], rounds: int = BOOTSTRAP_ROUNDS) -> tuple[float, float]:
    """95 % bootstrap interval of the mean over sets of each set's mean difference. Each set's
    queries are resampled on their own, so a large set cannot drown a small one."""
    rng = np.random.default_rng(0)  # the same figures on every run
    means = np.zeros(rounds)
    for diffs in per_set:
        means += resampled_means(diffs, rounds, rng)
    low, high = np.percentile(means / len(per_set), [2.5, 97.5])
    return float(low), float(high)


def gain(diffs: list[float]) -> dict[str, Any]:
    return {
        "differences": diffs,
        "mean": statistics.fmean(diffs),
        "interval": interval([diffs]),
        "wins": sum(d > 0 for d in diffs),
        "losses": sum(d < 0 for d in diffs),
    }


def grid() -> Iterable[Config]:
    for share, depth in itertools.product(SHARES, DEPTHS):
        for k in RRF_KS:
            yield Config("rrf", share, k, depth)
        yield Config("minmax", share, 60, depth)
        yield Config("zscore", share, 60, depth)


def sweep(sets: list[QuerySet], boosts: tuple[float, float]) -> dict[str, Any]:
    """Every configuration on every set, and the choice."""
    single_runs = {
        s.name: {r: per_query(s, single(s, r)) for r in ("keyword", "vector")} for s in sets
    }
    singles = {name: {r: means(pq) for r, pq in runs.items()} for name, runs in single_runs.items()}
    best_single = {name: max(v["nDCG@10"] for v in r.values()) for name, r in singles.items()}
    rows: list[dict[str, Any]] = []
    for config in grid():
        per_set = {s.name: scores(s, fused(s, config, boosts)) for s in sets}
        gains = [per_set[name]["nDCG@10"] - best_single[name] for name in per_set]
        rows.append(
            {
                "config": asdict(config),
                "label": config.label(),
                "sets": per_set,
                "mean_gain": statistics.fmean(gains),
                "min_gain": min(gains),
            }
        )
    safe = [row for row in rows if row["min_gain"] >= 0] or rows
    choice = max(safe, key=lambda row: (row["mean_gain"], row["min_gain"]))
    chosen = Config(**choice["config"])
    choice["gain"] = {}
    for s in sets:
        runs = single_runs[s.name]
        chosen_run = per_query(s, fused(s, chosen, boosts))
        choice["gain"][s.name] = gain(differences(chosen_run, runs["keyword"], runs["vector"]))
    return {"singles": singles, "best_single": best_single, "rows": rows, "choice": choice}


def compare(sets: list[QuerySet], config: Config, boosts: tuple[float, float]) -> dict[str, Any]:
    """Keyword, vector, equal-weight RRF and `config` on every set."""
    result: dict[str, Any] = {}
    for s in sets:
        runs = {
            "keyword": per_query(s, single(s, "keyword")),
            "vector": per_query(s, single(s, "vector")),
            "rrf equal": per_query(s, fused(s, BASELINE, boosts)),
            "chosen": per_query(s, fused(s, config, boosts)),
        }
        result[s.name] = {run: means(evaluated) for run, evaluated in runs.items()} | {
            "oracle": {"nDCG@10": oracle(runs["keyword"], runs["vector"])},
            "best share": best_share(s, config, boosts),
            "gain": gain(differences(runs["chosen"], runs["keyword"], runs["vector"])),
        }
    return result


def comparison_table(table: dict[str, Any]) -> list[str]:
    runs = ("keyword", "vector", "rrf equal", "chosen")
    lines = [
        f"  {'set':<24}"
        + "".join(f"{r:>11}" for r in runs)
        + f"{'vs best':>9}{'vs rrf':>8}{'oracle':>9}{'share':>14}   Recall@100 (same order)"
    ]
    for name, row in table.items():
        best = max(row["keyword"]["nDCG@10"], row["vector"]["nDCG@10"])
        lines.append(
            f"  {name:<24}"
            + "".join(f"{row[r]['nDCG@10']:>11.4f}" for r in runs)
            + f"{row['gain']['mean']:>+9.4f}"
            + f"{row['chosen']['nDCG@10'] - row['rrf equal']['nDCG@10']:>+8.4f}"
            + f"{row['oracle']['nDCG@10'] - best:>+9.4f}"
            + f"{row['best share']['nDCG@10'] - best:>+9.4f}"
            + f" v {row['best share']['vector_share']:.1f}   "
            + " ".join(f"{row[r]['Recall@100']:.4f}" for r in runs)
        )
    low, high = interval([row["gain"]["differences"] for row in table.values()])
    lines.append(
        f"  mean gain over the better single retriever: "
        f"{statistics.fmean(row['gain']['mean'] for row in table.values()):+.4f} "
        f"(95 % interval {low:+.4f} to {high:+.4f})"
    )
    lines.append("  per set, the gain's 95 % interval and the queries it wins and loses:")
    lines += [
        f"    {name:<24}{row['gain']['mean']:+.4f} ({row['gain']['interval'][0]:+.4f} to "
        f"{row['gain']['interval'][1]:+.4f}), {row['gain']['wins']} won and "
        f"{row['gain']['losses']} lost of {len(row['gain']['differences'])}"
        for name, row in table.items()
    ]

    def ceiling(run: str) -> float:
        return statistics.fmean(
            row[run]["nDCG@10"] - max(row["keyword"]["nDCG@10"], row["vector"]["nDCG@10"])
            for row in table.values()
        )

    lines.append(
        f"  oracle: the better of keyword and vector per query, known from the judgements "
        f"(a ceiling for choosing between them): {ceiling('oracle'):+.4f} on average"
    )
    lines.append(
        f"  share: the chosen fusion at each set's best vector share, known from the judgements "
        f"(a ceiling for weights set per collection): {ceiling('best share'):+.4f} on average"
    )
    return lines


def report(tuned: dict[str, Any], reported: dict[str, Any], top: int) -> str:
    names = list(tuned["best_single"])
    lines = ["tuning sets, nDCG@10 of the better single retriever:"]
    lines += [
        f"  {name}: keyword {tuned['singles'][name]['keyword']['nDCG@10']:.4f}, "
        f"vector {tuned['singles'][name]['vector']['nDCG@10']:.4f}"
        for name in names
    ]
    lines += ["", f"best {top} configurations by mean gain (nDCG@10 per tuning set):"]
    ranked = sorted(tuned["rows"], key=lambda row: -row["mean_gain"])
    lines.append(f"  {'configuration':<32}" + "".join(f"{n[:22]:>24}" for n in names) + "  gain")
    for row in ranked[:top]:
        lines.append(
            f"  {row['label']:<32}"
            + "".join(f"{row['sets'][n]['nDCG@10']:>24.4f}" for n in names)
            + f"  {row['mean_gain']:+.4f} (min {row['min_gain']:+.4f})"
        )
    lines += ["", "best per method (mean nDCG@10 gain over the better single, tuning sets):"]
    for method in ("rrf", "minmax", "zscore"):
        best = max(
            (row for row in tuned["rows"] if row["config"]["method"] == method),
            key=lambda row: row["mean_gain"],
        )
        lines.append(
            f"  {best['label']:<32} {best['mean_gain']:+.4f} (min {best['min_gain']:+.4f})"
        )
    choice = tuned["choice"]
    low, high = interval([g["differences"] for g in choice["gain"].values()])
    lines += [
        "",
        f"choice: {choice['label']}, gain {choice['mean_gain']:+.4f} on the tuning sets "
        f"(95 % interval {low:+.4f} to {high:+.4f})",
        "",
    ]
    lines += ["reporting sets (never tuned on), nDCG@10:", *comparison_table(reported)]
    return "\n".join(lines)


# The engine's default fusion as it was: every keyword list at its full weight.
DEFAULT = Config("zscore", 0.5, 60, DEPTH, length=0.0, guard=0.0)
LENGTHS = (5.0, 10.0, 20.0, 40.0)
GUARDS = (0.3, 0.5)  # a rare word said once scores ~0.45 of its ceiling: it keeps its say
STRENGTHS = (0.2, 0.3, 0.5, 1.0)
SHORTS = (5.0, 10.0, 20.0, 40.0)


def robust_grid() -> Iterable[tuple[Config, bool]]:
    """Each configuration, and whether it may be chosen: the engine's form (n0 and s0 both
    set: a short list of strong matches keeps its weight); the others for comparison."""
    for n0 in LENGTHS:
        yield from ((replace(DEFAULT, length=n0, guard=s0), True) for s0 in GUARDS)
        yield replace(DEFAULT, length=n0), False
    yield from ((replace(DEFAULT, strength=s), False) for s in STRENGTHS)
    yield from ((replace(DEFAULT, short=m), False) for m in SHORTS)


def paired(sets: list[QuerySet], config: Config, boosts: tuple[float, float]) -> dict[str, Any]:
    """`config` against the default fusion on each set: nDCG@10 and the per-query gain."""
    result: dict[str, Any] = {}
    for s in sets:
        base = per_query(s, fused(s, DEFAULT, boosts))
        run = per_query(s, fused(s, config, boosts))
        diffs = [run[q]["nDCG@10"] - base[q]["nDCG@10"] for q in run]
        result[s.name] = {
            "default": means(base)["nDCG@10"],
            "nDCG@10": means(run)["nDCG@10"],
            "gain": gain(diffs),
        }
    low, high = interval([row["gain"]["differences"] for row in result.values()])
    mean = statistics.fmean(row["gain"]["mean"] for row in result.values())
    return {"sets": result, "mean": mean, "interval": (low, high)}


def robust(
    tune: list[str], report_sets: list[str], boosts: tuple[float, float]
) -> tuple[dict[str, Any], str]:
    """Each factor for weak or short keyword lists against the default fusion, on the full
    sets and bench.fusion_small's small collections. The choice, on the tuning sets only: the
    best mean gain on the small ones among the engine's forms that lose on no full set beyond
    noise (each set's interval, and the mean's, reaches 0); then the reporting sets, once."""
    groups = {
        "tuning, full": [load_set(n) for n in tune],
        "tuning, small": [load_set(f"{n}-small") for n in tune],
    }
    rows: list[dict[str, Any]] = [
        {"label": c.label(), "config": asdict(c), "eligible": eligible}
        | {group: paired(sets, c, boosts) for group, sets in groups.items()}
        for c, eligible in robust_grid()
    ]
    safe = [
        r
        for r in rows
        if r["eligible"]
        and r["tuning, full"]["interval"][1] >= 0
        and all(row["gain"]["interval"][1] >= 0 for row in r["tuning, full"]["sets"].values())
    ]
    choice = max(safe, key=lambda r: r["tuning, small"]["mean"])
    chosen = Config(**choice["config"])
    reported = {
        "reporting, full": paired([load_set(n) for n in report_sets], chosen, boosts),
        "reporting, small": paired([load_set(f"{n}-small") for n in report_sets], chosen, boosts),
    }
    lines = [f"against {DEFAULT.label()} (the default before), mean nDCG@10 gain (95 % interval):"]
    lines.append(
        f"  {'configuration (*: for comparison)':<44}{'tuning, full':>28}{'tuning, small':>28}"
    )
    for r in rows:
        lines.append(
            f"  {r['label'] + ('' if r['eligible'] else ' *'):<44}"
            + "".join(
                f"{r[g]['mean']:>+10.4f} ({r[g]['interval'][0]:+.4f} {r[g]['interval'][1]:+.4f})"
                for g in groups
            )
        )
    lines.append(f"\nchoice: {choice['label']}")
    for group, table in [(g, choice[g]) for g in groups] + list(reported.items()):
        lines.append(
            f"  {group}: mean gain {table['mean']:+.4f} "
            f"({table['interval'][0]:+.4f} to {table['interval'][1]:+.4f})"
        )
        lines += [
            f"    {name:<28} {row['default']:.4f} -> {row['nDCG@10']:.4f} "
            f"{row['gain']['mean']:+.4f} ({row['gain']['interval'][0]:+.4f} to "
            f"{row['gain']['interval'][1]:+.4f}), {row['gain']['wins']} won and "
            f"{row['gain']['losses']} lost of {len(row['gain']['differences'])}"
            for name, row in table["sets"].items()
        ]
    return {"rows": rows, "choice": choice, "reporting": reported}, "\n".join(lines)


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--tune", nargs="+", default=list(TUNE), help="dataset/split to tune on")
    parser.add_argument("--report", nargs="+", default=list(REPORT), help="dataset/split to report")
    parser.add_argument("--top", type=int, default=15, help="configurations to list")
    parser.add_argument("--out", type=Path, help="write the sweep and the comparison as JSON")
    parser.add_argument(
        "--robust",
        action="store_true",
        help="measure the factors for weak or short keyword lists instead (needs the runs of "
        "bench.fusion_small and its ceilings)",
    )
    args = parser.parse_args()
    started = time.perf_counter()
    settings = load_settings()
    boosts = (settings.exact_token_keyword_boost, settings.exact_token_vector_boost)
    if args.robust:
        figures, text = robust(args.tune, args.report, boosts)
        print(text)
        print(f"\n({time.perf_counter() - started:.0f} s)")
        if args.out is not None:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(figures, indent=1) + "\n")
        return
    tuned = sweep([load_set(name) for name in args.tune], boosts)
    choice = Config(**tuned["choice"]["config"])
    reported = compare([load_set(name) for name in args.report], choice, boosts)
    print(report(tuned, reported, args.top))
    print(f"\n({time.perf_counter() - started:.0f} s)")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"tuning": tuned, "reporting": reported}, indent=1) + "\n")


if __name__ == "__main__":
    main()
