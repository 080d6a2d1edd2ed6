"""Weighted Reciprocal Rank Fusion: score(d) = Σ_m w_m / (k + rank_m(d))."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


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


def weighted_rrf(
    lists: Mapping[str, Sequence[Candidate]], weights: Mapping[str, float], k: int
) -> list[Fused]:
    """Fuse ranked lists; ties go to the better best rank, then the lower chunk id."""
    fused: dict[int, Fused] = {}
    for retriever, candidates in lists.items():
        weight = weights.get(retriever, 0.0)
        for rank, candidate in enumerate(candidates, 1):
            entry = fused.setdefault(candidate.chunk_id, Fused(candidate.chunk_id))
            entry.score += weight / (k + rank)
            entry.ranks[retriever] = (rank, candidate.score)
    return sorted(
        fused.values(),
        key=lambda f: (-f.score, min(rank for rank, _ in f.ranks.values()), f.chunk_id),
    )
