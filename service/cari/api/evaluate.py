"""POST /v1/collections/{collection}/eval."""

from __future__ import annotations

from typing import Annotated

from litestar import post
from litestar.openapi.spec import Example
from litestar.params import Body

from cari.api.auth import requires
from cari.api.consistency import READS_ONLY
from cari.api.openapi import CollectionName, V1Operation
from cari.api.problems import responses
from cari.api.state import AppState
from cari.limits import MAX_EVAL_QUESTIONS
from cari.schema.evaluate import EvalReport, EvalRequest
from cari.tune.evaluate import evaluate, judged

JUDGED = Example(
    summary="Two judged questions",
    value={
        "questions": [
            {"id": "q1", "query": "how do I back up the database?", "relevant": ["backups.md"]},
            {
                "query": "restore a dump",
                "relevant": {"operations.md": 2, "backups.md": 1},
            },
        ],
        "k": 100,
        "modes": ["keyword", "vector", "hybrid", "default"],
    },
)


@post(
    "/collections/{collection:str}/eval",
    summary="Measure a collection's ranking on judged questions",
    description=(
        "Each question is searched once per mode (keyword, vector, hybrid, and `default`: the "
        "collection's own), as a search request with threshold 0; a document ranks where its "
        "best chunk does. Per mode: the means over the questions of nDCG@10 (the grades as "
        "gains), Recall@k and MRR@10, each with its 95 % bootstrap interval, and the latency "
        "of one search at p50 and p95; then the questions where hybrid's nDCG@10 is below "
        "keyword's or vector's, worst first (at most 10). `relevant`: the relevant documents' "
        "ids, or an object of id: grade. At most "
        f"{MAX_EVAL_QUESTIONS:,} questions, each searched once per mode (the same text once) "
        "as the key's searches are, its tenant's documents only: a thousand take minutes. "
        "`cari eval` is the same on the command line."
    ),
    status_code=200,
    tags=["search"],
    operation_id="evaluateCollection",
    responses=responses(400, 404, 413, 422, 503),
    operation_class=V1Operation,
    opt={**READS_ONLY, **requires("search")},
)
async def evaluate_collection(
    state: AppState,
    collection: CollectionName,
    data: Annotated[EvalRequest, Body(examples=[JUDGED])],
) -> EvalReport:
    questions = judged(data.questions)
    return await evaluate(state.runtime.searcher, collection, questions, k=data.k, modes=data.modes)
