"""An evaluation (`POST …/eval`, `cari eval --json`): judged questions in, the collection's
ranking quality per search mode out."""

from __future__ import annotations

from typing import Annotated, get_args

import msgspec

from cari.limits import (
    MAX_EVAL_QUESTIONS,
    MAX_JUDGED,
    DocumentId,
    EvalMode,
    Grade,
    QueryText,
    RecallDepth,
)

Relevant = Annotated[
    Annotated[dict[DocumentId, Grade], msgspec.Meta(min_length=1, max_length=MAX_JUDGED)]
    | Annotated[list[DocumentId], msgspec.Meta(min_length=1, max_length=MAX_JUDGED)],
    msgspec.Meta(
        description="The question's relevant documents (their ids): a list, each of grade 1, "
        "or an object of id: grade (1 or more; higher, more relevant: nDCG's gain)."
    ),
]
QuestionId = Annotated[str, msgspec.Meta(min_length=1, max_length=512)]


class EvalQuestion(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A question and what answers it; its `id`, which names it in the report's losses,
    defaults to its 1-based position."""

    query: QueryText
    relevant: Relevant
    id: QuestionId | None = None


class EvalRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    questions: Annotated[
        list[EvalQuestion], msgspec.Meta(min_length=1, max_length=MAX_EVAL_QUESTIONS)
    ]
    k: Annotated[RecallDepth, msgspec.Meta(description="The depth of Recall@k.")] = 100
    modes: Annotated[
        list[EvalMode],
        msgspec.Meta(
            min_length=1,
            description='The modes measured; "default" is the collection\'s own (no mode set).',
        ),
    ] = msgspec.field(default_factory=lambda: list(get_args(EvalMode)))


class Figure(msgspec.Struct):
    """A mean over the questions and its 95 % bootstrap interval."""

    mean: float
    low: float
    high: float


class Latency(msgspec.Struct):
    p50_ms: float
    p95_ms: float


class ModeFigures(msgspec.Struct, kw_only=True):
    mode: EvalMode
    ndcg_at_10: Figure
    recall_at_k: Figure
    mrr_at_10: Figure
    latency: Latency  # of one search, as the server ran it


class HybridLoss(msgspec.Struct, kw_only=True):
    """A question on which hybrid ranks worse than keyword or vector alone: each one's nDCG@10."""

    id: str
    query: str
    hybrid: float
    keyword: float
    vector: float


class EvalReport(msgspec.Struct, kw_only=True):
    collection: str
    questions: int  # judged, each searched once per mode
    k: int
    modes: list[ModeFigures]
    # Worst first, at most 10; measured when keyword, vector and hybrid all ran.
    hybrid_losses: list[HybridLoss]
    warnings: list[str]  # a degraded search's (the figures are then not the collection's)
