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
) -> list[Fused]:
    """Fuse ranked lists; ties go to the better best rank, then the lower chunk id."""
    if method == "rrf":
        return weighted_rrf(lists, weights, rrf_k)
    return convex(lists, weights, _NORMALISERS[method])


def weighted_rrf(
    lists: Mapping[str, Sequence[Candidate]], weights: Mapping[str, float], k: int
) -> list[Fused]:
    fused = _entries(lists)
    for retriever, candidates in lists.items():
        weight = weights.get(retriever, 0.0)
        for rank, candidate in enumerate(candidates, 1):
            fused[candidate.chunk_id].score += weight / (k + rank)
    return _ordered(fused)


# Normalised scores of a list, and the value of a chunk the list does not hold.
Normaliser = Callable[[Sequence[float]], tuple[list[float], float]]


def convex(
    lists: Mapping[str, Sequence[Candidate]],
    weights: Mapping[str, float],
    normalise: Normaliser,
) -> list[Fused]:
    total = sum(weights.get(retriever, 0.0) for retriever in lists)
    shares = [(r, weights.get(r, 0.0) / total if total else 0.0) for r in lists]
    normalised: dict[str, dict[int, float]] = {}
    floors: dict[str, float] = {}
    for retriever, candidates in lists.items():
        values, floors[retriever] = normalise([c.score for c in candidates])
        normalised[retriever] = dict(zip((c.chunk_id for c in candidates), values, strict=True))
    fused = _entries(lists)
    for chunk_id, entry in fused.items():
        # A loop: sum() over a generator's additions, in its order, without a generator per
        # chunk. With `_entries` and `_ordered`'s key, two lists of 100 fuse in 377 µs, not
        # 562 (the same scores, bit for bit, on 9,000 random fusions).
        score = 0.0
        for retriever, share in shares:
            score += share * normalised[retriever].get(chunk_id, floors[retriever])
        entry.score = score
    return _ordered(fused)


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


def _entries(lists: Mapping[str, Sequence[Candidate]]) -> dict[int, Fused]:
    """Each listed chunk once, with its rank and raw score in each list that holds it."""
    fused: dict[int, Fused] = {}
    for retriever, candidates in lists.items():
        for rank, candidate in enumerate(candidates, 1):
            entry = fused.get(candidate.chunk_id)
            if entry is None:
                entry = fused[candidate.chunk_id] = Fused(candidate.chunk_id)
            entry.ranks[retriever] = (rank, candidate.score)
    return fused


def _ordered(fused: dict[int, Fused]) -> list[Fused]:
    # min over (rank, score) pairs is the best rank's pair: no generator per chunk.
    return sorted(fused.values(), key=lambda f: (-f.score, min(f.ranks.values())[0], f.chunk_id))
