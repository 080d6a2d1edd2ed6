"""`cari tune fusion`: which fusion method and weights rank this collection's judged questions
best, and whether the gain over its current defaults is more than noise.

Every configuration (each method at each vector share, plus the collection's defaults) is a
real hybrid search of each question through the searcher, as `cari eval` runs them; a
question's vector is embedded once and found in the searcher's cache after. The gain is
estimated by cross-validation: the questions are dealt into `folds` (a fixed shuffle); each
fold is scored with the configuration that was best on the other folds, so the estimate never
scores a choice on the questions it was chosen on. Its 95 % bootstrap interval is of the
paired differences per question against the defaults. `apply` stores the configuration best
on all the questions, and only when that interval lies above zero: a gain inside the noise is
no reason to change a collection.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from cari import collection
from cari.limits import Method
from cari.schema.collections import CollectionUpdate
from cari.schema.search import SearchRequest
from cari.schema.tune import FusionConfig, FusionTuning, Scored
from cari.tune.bootstrap import mean_interval
from cari.tune.evaluate import CUT, document_ranking
from cari.tune.metrics import ndcg_at
from cari.tune.questions import Judged

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

    from cari.search.engine import Searcher

METHODS: tuple[Method, ...] = ("zscore", "minmax", "rrf")
SHARES = tuple(round(0.1 * i, 1) for i in range(1, 10))  # vector / (vector + keyword)
SHOWN = 10  # configurations listed, best first
SEED = 11


async def tune(
    searcher: Searcher,
    pool: AsyncConnectionPool,
    name: str,
    questions: Sequence[Judged],
    *,
    folds: int,
    apply: bool,
    progress: Callable[[int, int], None] | None = None,
) -> FusionTuning:
    folds = min(folds, len(questions))  # fewer questions than folds: one question a fold
    configs: list[FusionConfig | None] = [None]  # None: the collection's defaults
    configs += [FusionConfig(method, share) for method in METHODS for share in SHARES]
    scores: list[list[float]] = []  # per configuration, per question: nDCG@10
    texts = list(dict.fromkeys(q.text for q in questions))  # each searched once a configuration
    total = len(configs) * len(texts)
    for index, config in enumerate(configs):
        rankings = {}
        for number, text in enumerate(texts, 1):
            rankings[text] = document_ranking(await searcher.search(name, _request(text, config)))
            if progress is not None:
                progress(index * len(texts) + number, total)
        scores.append([ndcg_at(rankings[q.text], q.relevant, CUT) for q in questions])
    defaults, tried = scores[0], scores[1:]
    held_out = _cross_validated(tried, folds)
    gain = mean_interval([h - d for h, d in zip(held_out, defaults, strict=True)])
    ranked = sorted(range(len(tried)), key=lambda i: -sum(tried[i]))
    best = configs[1 + ranked[0]]
    assert best is not None
    applied = apply and gain[1] > 0
    if applied:
        async with pool.connection() as conn:
            await collection.update(conn, name, _update(best))
    return FusionTuning(
        collection=name,
        questions=len(questions),
        folds=folds,
        defaults=Scored(config=None, ndcg_at_10=_mean(defaults)),
        best=[Scored(config=configs[1 + i], ndcg_at_10=_mean(tried[i])) for i in ranked[:SHOWN]],
        gain=gain[0],
        gain_low=gain[1],
        gain_high=gain[2],
        recommended=best,
        applied=applied,
    )


def _cross_validated(tried: Sequence[Sequence[float]], folds: int) -> list[float]:
    """Each question's nDCG@10 under the configuration best on the folds it is not in."""
    count = len(tried[0])
    order = list(range(count))
    random.Random(SEED).shuffle(order)
    fold_of = {question: position % folds for position, question in enumerate(order)}
    held_out = [0.0] * count
    for fold in range(folds):
        inside = [q for q in range(count) if fold_of[q] != fold]
        chosen = max(range(len(tried)), key=lambda i: sum(tried[i][q] for q in inside))
        for question in range(count):
            if fold_of[question] == fold:
                held_out[question] = tried[chosen][question]
    return held_out


def _request(query: str, config: FusionConfig | None) -> SearchRequest:
    if config is None:
        return SearchRequest(query=query, top_k=CUT, threshold=0)
    return SearchRequest(
        query=query,
        mode="hybrid",
        top_k=CUT,
        threshold=0,
        fusion=config.method,
        vector_weight=config.vector_share,
        keyword_weight=round(1 - config.vector_share, 1),
    )


def _update(config: FusionConfig) -> CollectionUpdate:
    """As the collection's defaults: hybrid, the method, and weights in the share's ratio."""
    return CollectionUpdate(
        search_mode="hybrid",
        fusion=config.method,
        vector_weight=config.vector_share,
        keyword_weight=round(1 - config.vector_share, 1),
    )


def _mean(values: Sequence[float]) -> float:
    return round(sum(values) / len(values), 4)
