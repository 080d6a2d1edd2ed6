"""Fusion of the retrievers' ranked lists into one.

- `rrf`: weighted Reciprocal Rank Fusion, score(d) = Σ_m w_m / (k + rank_m(d)). It uses ranks
  only, so it needs no calibration, but it throws away how far apart the scores are.
- `minmax` and `zscore`: a convex combination of normalised scores,
  score(d) = Σ_m w_m · n_m(d) / Σ_m w_m, each retriever's scores normalised over its own
  candidate list. `minmax` maps that list's lowest score to 0 and its highest to 1; `zscore`
  maps mean - 3 sd to 0 and mean + 3 sd to 1, clipped (distribution-based score fusion), so
  one outlier does not stretch the scale the way it does for min-max. A chunk missing from a
  list scores 0 there. Scores are then in 0..1.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

Method = Literal["rrf", "minmax", "zscore"]


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
    fused: dict[int, Fused] = {}
    for retriever, candidates in lists.items():
        weight = weights.get(retriever, 0.0)
        for rank, candidate in enumerate(candidates, 1):
            entry = fused.setdefault(candidate.chunk_id, Fused(candidate.chunk_id))
            entry.score += weight / (k + rank)
            entry.ranks[retriever] = (rank, candidate.score)
    return _ordered(fused)


Normaliser = Callable[[Sequence[float]], list[float]]


def convex(
    lists: Mapping[str, Sequence[Candidate]],
    weights: Mapping[str, float],
    normalise: Normaliser,
) -> list[Fused]:
    total = sum(weights.get(retriever, 0.0) for retriever in lists)
    fused: dict[int, Fused] = {}
    for retriever, candidates in lists.items():
        share = weights.get(retriever, 0.0) / total if total else 0.0
        normalised = normalise([c.score for c in candidates])
        for rank, (candidate, value) in enumerate(zip(candidates, normalised, strict=True), 1):
            entry = fused.setdefault(candidate.chunk_id, Fused(candidate.chunk_id))
            entry.score += share * value
            entry.ranks[retriever] = (rank, candidate.score)
    return _ordered(fused)


def min_max(scores: Sequence[float]) -> list[float]:
    """The list's lowest score -> 0, its highest -> 1; all equal -> 1."""
    if not scores:
        return []
    low, high = min(scores), max(scores)
    if high == low:
        return [1.0] * len(scores)
    return [(s - low) / (high - low) for s in scores]


def z_score(scores: Sequence[float]) -> list[float]:
    """mean - 3 sd -> 0, mean + 3 sd -> 1, clipped; a list of one, or of equal scores, -> 1."""
    if len(scores) < 2:
        return [1.0] * len(scores)
    mean = statistics.fmean(scores)
    spread = statistics.pstdev(scores, mean)
    if spread == 0:
        return [1.0] * len(scores)
    return [min(1.0, max(0.0, (s - mean + 3 * spread) / (6 * spread))) for s in scores]


_NORMALISERS: dict[str, Normaliser] = {"minmax": min_max, "zscore": z_score}


def _ordered(fused: dict[int, Fused]) -> list[Fused]:
    return sorted(
        fused.values(),
        key=lambda f: (-f.score, min(rank for rank, _ in f.ranks.values()), f.chunk_id),
    )
