"""Fusion of the retrievers' ranked lists into one.

- `rrf`: weighted Reciprocal Rank Fusion, score(d) = Σ_m w_m / (k + rank_m(d)). It uses ranks
  only, so it needs no calibration, but it throws away how far apart the scores are.
- `minmax` and `zscore`: a convex combination of normalised scores,
  score(d) = Σ_m w_m · n_m(d) / Σ_m w_m, each retriever's scores normalised over its own
  candidate list: `minmax` maps that list's lowest score to 0 and its highest to 1 (scores
  then lie in 0..1); `zscore` takes (score - mean) / standard deviation, so a result that
  stands far above the rest of its list keeps that lead, where min-max would cap it at 1. A
  chunk missing from a list gets that list's lowest normalised score: it ranked below all of
  them. A list of one, or of equal scores, normalises to 1 with 0 for the missing.

Normalising is blind to how much a list found: a keyword list of three chunks sharing a common
word with the question spreads over the same scale as one of a hundred strong matches, and its
top chunk, standing one deviation above the other two, outranked the chunk the vector search
was sure of. A keyword list shorter than the candidates asked (every chunk sharing a word with
the question: there are no more) whose best match is weak weighs less (`weighed`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from cari.limits import Method


@dataclass(frozen=True, slots=True)
class Candidate:
    """A chunk as one retriever ranked it (best first); `score` is that retriever's own."""

    chunk_id: int
    score: float


@dataclass(slots=True)
class Fused:
    chunk_id: int
    score: float = 0.0
    # retriever -> (1-based rank, the retriever's raw score)
    ranks: dict[str, tuple[int, float]] = field(default_factory=dict)


def fuse(
    lists: Mapping[str, Sequence[Candidate]],
    weights: Mapping[str, float],
    method: Method,
    rrf_k: int,
    limit: int | None = None,
) -> list[Fused]:
    """Fuse ranked lists into the best `limit` chunks (all when None); ties go to the better
    best rank, then the lower chunk id."""
    if method == "rrf":
        scores = weighted_rrf(lists, weights, rrf_k)
    else:
        scores = convex(lists, weights, _NORMALISERS[method])
    return _head(lists, scores, limit)


# A keyword list of n chunks, shorter than the `asked` candidates, weighs
# n (asked + n0) / ((n + n0) asked) of its weight (0.28 at 10 of 100 asked, 0.7 at 40, all of
# it when full), or min(1, best / (s0 ceiling)) if that is more, `ceiling` the question's (bm25:
# what a chunk holding each of its terms very often would score): a one-word question's word
# found once scores ~0.45 of it and keeps its say, a couple of common words lose theirs. Chosen
# on small collections of the tuning sets, where it gains 0.005 nDCG@10 and moves no full set
# beyond noise (`python -m bench.fusion --robust`,
# docs/benchmarks.md#short-keyword-lists-in-small-collections-issue-64-2026-12-08).
SHORT_KEYWORD_N0 = 40.0
STRONG_KEYWORD_S0 = 0.5


def weighed(
    weights: Mapping[str, float],
    lists: Mapping[str, Sequence[Candidate]],
    asked: int,
    ceiling: float,
    n0: float = SHORT_KEYWORD_N0,
    s0: float = STRONG_KEYWORD_S0,
) -> dict[str, float]:
    """The weights, the keyword list's lowered when it holds fewer than the `asked` candidates
    (there are no more: every chunk sharing a word with the question is in it) and its best
    score is weak against `ceiling`. Only the keyword list's length says how much matched: the
    vector list is as long as asked or as the collection. n0 0: the weights as given."""
    weighted = dict(weights)
    keyword = lists.get("keyword")
    if keyword is None or n0 <= 0 or len(keyword) >= asked:
        return weighted
    n = len(keyword)
    factor = n * (asked + n0) / ((n + n0) * asked)
    if keyword and ceiling > 0 and s0 > 0:
        factor = max(factor, min(1.0, keyword[0].score / (s0 * ceiling)))
    weighted["keyword"] = weights.get("keyword", 0.0) * factor
    return weighted


def weighted_rrf(
    lists: Mapping[str, Sequence[Candidate]], weights: Mapping[str, float], k: int
) -> dict[int, float]:
    """Each listed chunk's fused score."""
    scores = dict.fromkeys(_listed(lists), 0.0)
    for retriever, candidates in lists.items():
        weight = weights.get(retriever, 0.0)
        for rank, candidate in enumerate(candidates, 1):
            scores[candidate.chunk_id] += weight / (k + rank)
    return scores


# Normalised scores of a list, and the value of a chunk the list does not hold.
Normaliser = Callable[[Sequence[float]], tuple[list[float], float]]


def convex(
    lists: Mapping[str, Sequence[Candidate]],
    weights: Mapping[str, float],
    normalise: Normaliser,
) -> dict[int, float]:
    """Each listed chunk's fused score."""
    total = sum(weights.get(retriever, 0.0) for retriever in lists)
    terms = []  # per list: its normalised scores, its missing chunks' value, its share
    for retriever, candidates in lists.items():
        values, floor = normalise([c.score for c in candidates])
        normalised = dict(zip((c.chunk_id for c in candidates), values, strict=True))
        terms.append((normalised, floor, weights.get(retriever, 0.0) / total if total else 0.0))
    scores = dict.fromkeys(_listed(lists), 0.0)
    for normalised, floor, share in terms:  # each chunk's sum in the lists' order
        scores = {c: score + share * normalised.get(c, floor) for c, score in scores.items()}
    return scores


def min_max(scores: Sequence[float]) -> tuple[list[float], float]:
    """The list's lowest score -> 0, its highest -> 1."""
    if not scores or max(scores) == min(scores):
        return [1.0] * len(scores), 0.0
    low, high = min(scores), max(scores)
    return [(s - low) / (high - low) for s in scores], 0.0


def z_score(scores: Sequence[float]) -> tuple[list[float], float]:
    """(score - mean) / standard deviation; the missing get the lowest."""
    if not scores or max(scores) == min(scores):
        return [1.0] * len(scores), 0.0
    # math.fsum, not statistics.pstdev: pstdev sums in exact fractions, 88 µs for a list of 100
    # against 9 µs, and a hybrid search normalises two lists; fsum's sums are correctly rounded.
    mean = math.fsum(scores) / len(scores)
    spread = math.sqrt(math.fsum((s - mean) ** 2 for s in scores) / len(scores))
    if spread == 0:  # differences so small that their squares underflow
        return [1.0] * len(scores), 0.0
    values = [(s - mean) / spread for s in scores]
    return values, min(values)


_NORMALISERS: dict[str, Normaliser] = {"minmax": min_max, "zscore": z_score}


def _listed(lists: Mapping[str, Sequence[Candidate]]) -> dict[int, None]:
    """Each listed chunk once, in the order first listed."""
    return dict.fromkeys(c.chunk_id for candidates in lists.values() for c in candidates)


def _head(
    lists: Mapping[str, Sequence[Candidate]], scores: dict[int, float], limit: int | None
) -> list[Fused]:
    """The best `limit` chunks by score, each with its rank and raw score in each list that
    holds it. Only those returned become `Fused`: a search keeps the first 10-20 of ~170 fused
    chunks, and making all of them was much of a fusion's time."""
    ranks = [
        (retriever, {c.chunk_id: (rank, c.score) for rank, c in enumerate(candidates, 1)})
        for retriever, candidates in lists.items()
    ]
    best: dict[int, int] = {}  # each chunk's best rank: ties go to it
    for _, ranked in ranks:
        for chunk_id, (rank, _) in ranked.items():
            if rank < best.get(chunk_id, rank + 1):
                best[chunk_id] = rank
    order = sorted((-score, best[chunk_id], chunk_id) for chunk_id, score in scores.items())
    return [
        Fused(
            chunk_id,
            scores[chunk_id],
            {retriever: ranked[chunk_id] for retriever, ranked in ranks if chunk_id in ranked},
        )
        for _, _, chunk_id in order[:limit]
    ]
