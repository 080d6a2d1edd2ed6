"""`cari tune ef-search` and `POST /v1/collections/{collection}/tune/ef-search`: HNSW recall
against the exact top k, and latency, per `ef_search` (cari.tune.ef_search)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from cari.limits import EfSearch, Method, QueryText, TopK
from cari.schema.evaluate import EvalQuestion

# The ef_search values measured unless the request names its own: pgvector's default (40) and
# Cari's (100) among them, up to where recall on most data has long stopped growing.
EF_SEARCH_VALUES = (10, 20, 40, 60, 80, 100, 150, 200, 300, 400)
MAX_TUNING_QUESTIONS = 1000
# 28 searches a question: 300 are ~8,400 searches, a few minutes on 2 cores.
MAX_FUSION_QUESTIONS = 300

TuningQuestions = Annotated[
    list[QueryText],
    msgspec.Meta(
        min_length=1,
        max_length=MAX_TUNING_QUESTIONS,
        description="Questions to measure on, embedded as searches embed them; unset: a "
        "key-phrase question made of each of `sample` chunks of the collection (its rarest "
        "words).",
    ),
]
Sample = Annotated[
    int,
    msgspec.Meta(
        ge=1,
        le=MAX_TUNING_QUESTIONS,
        description="Chunks drawn as questions when no `questions` are given.",
    ),
]
RecallTarget = Annotated[
    float,
    msgspec.Meta(
        gt=0,
        le=1,
        description="The recall@k the recommended ef_search reaches: the smallest value whose "
        "mean recall is at least this.",
    ),
]


class EfSearchTuneRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    questions: TuningQuestions | None = None
    sample: Sample = 200
    seed: Annotated[int, msgspec.Meta(ge=0, le=2**31 - 1)] = 0
    k: TopK = 10
    recall: RecallTarget = 0.99
    values: Annotated[
        list[EfSearch],
        msgspec.Meta(min_length=1, max_length=20, description="The ef_search values to measure."),
    ] = msgspec.field(default_factory=lambda: list(EF_SEARCH_VALUES))
    filters: dict[str, Any] | None = None  # as a search's: recall within what they allow
    apply: bool = False  # store the recommendation as the collection's ef_search


class EfSearchPoint(msgspec.Struct):
    """One ef_search measured: the mean recall@k over the questions (with its 95 % bootstrap
    interval), each question's search latency, and whether PostgreSQL searched through the
    HNSW index (false: it read the collection exactly, as it may for a small one)."""

    ef_search: int
    recall: float
    recall_low: float
    recall_high: float
    p50_ms: float
    p95_ms: float
    index_used: bool


class EfSearchTuning(msgspec.Struct):
    collection: str
    questions: int
    questions_from: Literal["given", "sample"]
    k: int
    target: float
    filters: dict[str, Any] | None
    exact_p50_ms: float  # the exact scan recall is measured against, per question
    # none when there is nothing to find: no embedded chunk (within the filters) to ask of
    points: list[EfSearchPoint]
    # The smallest value searched through the index that reaches the target; None: none did
    recommended: int | None
    # What the collection's searches used before this tuning, and from where.
    current: int
    current_source: Literal["collection", "settings"]
    applied: bool


class FusionTuneRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    questions: Annotated[
        list[EvalQuestion], msgspec.Meta(min_length=2, max_length=MAX_FUSION_QUESTIONS)
    ]
    folds: Annotated[
        int,
        msgspec.Meta(
            ge=2,
            le=10,
            description="Cross-validation folds: each is scored with the configuration best "
            "on the others (at most one a question).",
        ),
    ] = 5
    apply: bool = False  # store the best configuration, if its gain is beyond the noise


class FusionConfig(msgspec.Struct, frozen=True):
    """A hybrid search's fusion: its method, and the vector weight's share of the two weights
    (the keyword weight is 1 - share)."""

    method: Method
    vector_share: float


class Scored(msgspec.Struct):
    config: FusionConfig | None  # None: the collection's defaults
    ndcg_at_10: float  # the mean over the questions


class FusionTuning(msgspec.Struct, kw_only=True):
    collection: str
    questions: int
    folds: int  # as many as asked, or one a question if fewer
    defaults: Scored
    best: list[Scored]  # the configurations best on all the questions, best first
    # The cross-validated gain in nDCG@10 over the defaults, and its 95 % bootstrap interval.
    gain: float
    gain_low: float
    gain_high: float
    recommended: FusionConfig  # the best on all the questions
    applied: bool  # only when requested and the interval lies above 0
