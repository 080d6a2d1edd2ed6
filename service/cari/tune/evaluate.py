"""`cari eval` and `POST …/eval`: a collection's ranking quality on judged questions, per mode.

Each question is searched once per mode through the searcher, as a request would be (the
collection's settings, the key's tenant filter), with threshold 0: this measures the ranking,
not the cut. Results are chunks; a document ranks where its best chunk does, since the
judgements are per document. The figures per mode are the means over the questions of nDCG@10,
Recall@k and MRR@10 (`cari.tune.metrics`), each with its bootstrap interval
(`cari.tune.bootstrap`), and the latency of one search at p50 and p95, after one untimed search
per mode. A question's embedding is paid by the first of its modes that needs it (vector, in the
usual order); hybrid's and the defaults' find it in the searcher's cache, as a question asked
again does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from cari.errors import InvalidInput
from cari.limits import EvalMode, refuse_nul
from cari.schema.evaluate import (
    EvalQuestion,
    EvalReport,
    Figure,
    HybridLoss,
    Latency,
    ModeFigures,
)
from cari.schema.search import SearchRequest, SearchResponse
from cari.tune.bootstrap import mean_interval
from cari.tune.metrics import ndcg_at, recall_at, reciprocal_rank_at
from cari.tune.questions import Judged

if TYPE_CHECKING:
    from cari.search.engine import Searcher

CUT = 10  # of nDCG@10 and MRR@10
MAX_LOSSES = 10
SINGLE: tuple[EvalMode, ...] = ("keyword", "vector")


async def evaluate(
    searcher: Searcher,
    collection: str,
    questions: Sequence[Judged],
    *,
    k: int,
    modes: Sequence[EvalMode],
    progress: Callable[[int], None] | None = None,
) -> EvalReport:
    """Search each of `questions` in each of `modes` and measure the rankings; `progress` is
    told how many questions are done after each. A question asked again (the same text) is
    searched once: its rankings are the same, and its judgements its own."""
    modes = list(dict.fromkeys(modes))
    found: dict[str, dict[EvalMode, list[str]]] = {}  # question -> its ranking per mode
    latency: dict[EvalMode, list[float]] = {mode: [] for mode in modes}
    warnings: dict[str, None] = {}
    for mode in modes:  # untimed: a first search's cold start (connections, caches) is no mode's
        await searcher.search(collection, _request(questions[0].text, mode, k))
    for done, question in enumerate(questions, 1):
        if question.text not in found:
            found[question.text] = {}
            for mode in modes:
                started = time.perf_counter()
                response = await searcher.search(collection, _request(question.text, mode, k))
                latency[mode].append((time.perf_counter() - started) * 1000)
                warnings.update(dict.fromkeys(response.warnings if response.degraded else ()))
                found[question.text][mode] = document_ranking(response)
        if progress is not None:
            progress(done)
    rankings = {mode: [found[q.text][mode] for q in questions] for mode in modes}
    ndcg = {
        m: [ndcg_at(r, q.relevant, CUT) for r, q in zip(rankings[m], questions, strict=True)]
        for m in modes
    }
    return EvalReport(
        collection=collection,
        questions=len(questions),
        k=k,
        modes=[_figures(mode, questions, rankings[mode], latency[mode], k) for mode in modes],
        hybrid_losses=hybrid_losses(questions, ndcg),
        warnings=list(warnings),
    )


def _figures(
    mode: EvalMode,
    questions: Sequence[Judged],
    rankings: Sequence[list[str]],
    latency: Sequence[float],
    k: int,
) -> ModeFigures:
    def mean(metric: Callable[[Sequence[str], dict[str, int], int], float], cut: int) -> Figure:
        return Figure(
            *mean_interval(
                [metric(r, q.relevant, cut) for r, q in zip(rankings, questions, strict=True)]
            )
        )

    p50, p95 = np.percentile(latency, [50, 95])
    return ModeFigures(
        mode=mode,
        ndcg_at_10=mean(ndcg_at, CUT),
        recall_at_k=mean(recall_at, k),
        mrr_at_10=mean(reciprocal_rank_at, CUT),
        latency=Latency(p50_ms=float(p50), p95_ms=float(p95)),
    )


def _request(query: str, mode: EvalMode, k: int) -> SearchRequest:
    """A search of the top `k` chunks: keyword and vector each retrieve `k` (their own list is
    the answer), hybrid and the collection's defaults fuse the server's candidates, as
    requests do."""
    if mode == "default":
        return SearchRequest(query=query, top_k=k, threshold=0)
    candidates = k if mode in SINGLE else None
    return SearchRequest(query=query, mode=mode, top_k=k, threshold=0, candidates=candidates)


def document_ranking(response: SearchResponse) -> list[str]:
    """The documents of a search's chunks, each at its best (first) rank; catalog items and
    installments, which no judgement names, are left out."""
    return list(dict.fromkeys(r.document_id for r in response.results if r.document_id is not None))


def hybrid_losses(
    questions: Sequence[Judged], ndcg: dict[EvalMode, list[float]]
) -> list[HybridLoss]:
    """The questions where hybrid's nDCG@10 is below the better of keyword's and vector's,
    the largest loss first."""
    if not {"hybrid", *SINGLE} <= ndcg.keys():
        return []
    losses = [
        HybridLoss(id=q.id, query=q.text, hybrid=hybrid, keyword=keyword, vector=vector)
        for q, hybrid, keyword, vector in zip(
            questions, ndcg["hybrid"], ndcg["keyword"], ndcg["vector"], strict=True
        )
        if hybrid < max(keyword, vector)
    ]
    losses.sort(key=lambda loss: loss.hybrid - max(loss.keyword, loss.vector))
    return losses[:MAX_LOSSES]


def judged(questions: Sequence[EvalQuestion]) -> list[Judged]:
    """A request's questions as judged ones: InvalidInput naming a blank question, or an id
    holding a NUL (the schema allows neither)."""
    found = []
    for index, question in enumerate(questions, 1):
        where = f"questions[{index - 1}]"
        if not question.query.replace("\x00", " ").strip():
            raise InvalidInput(f"{where}.query", "is empty")
        refuse_nul(f"{where}.id", question.id)
        refuse_nul(f"{where}.relevant", question.relevant)
        graded = question.relevant
        relevant = dict.fromkeys(graded, 1) if isinstance(graded, list) else graded
        found.append(Judged(question.id or str(index), question.query, relevant))
    return found
