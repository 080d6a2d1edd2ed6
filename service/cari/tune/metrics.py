"""Ranking metrics as trec_eval defines them: nDCG with the grades as gains, recall, the
reciprocal rank.

A ranking is a question's documents, best first; `relevant` maps each relevant document to its
grade (above 0). tests/test_evaluate.py holds them to pytrec_eval's figures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np


def ndcg_at(ranking: Sequence[str], relevant: Mapping[str, int], cut: int) -> float:
    """Normalized discounted cumulative gain of the first `cut` documents: each document's
    grade over log2(1 + its rank), divided by that of the best order of the judged ones."""
    gained = sum(
        relevant.get(doc, 0) / np.log2(rank + 1) for rank, doc in enumerate(ranking[:cut], 1)
    )
    best = sorted(relevant.values(), reverse=True)[:cut]
    ideal = sum(grade / np.log2(rank + 1) for rank, grade in enumerate(best, 1))
    return float(gained / ideal) if ideal > 0 else 0.0


def recall_at(ranking: Sequence[str], relevant: Mapping[str, int], cut: int) -> float:
    """The share of the relevant documents among the first `cut`."""
    found = sum(1 for doc in ranking[:cut] if doc in relevant)
    return found / len(relevant) if relevant else 0.0


def reciprocal_rank_at(ranking: Sequence[str], relevant: Mapping[str, int], cut: int) -> float:
    """1 / the rank of the first relevant document among the first `cut`; 0 if none is."""
    return next((1 / rank for rank, doc in enumerate(ranking[:cut], 1) if doc in relevant), 0.0)
