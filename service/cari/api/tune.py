"""POST /v1/collections/{collection}/tune/ef-search and …/tune/fusion: `cari tune` over HTTP."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import post
from litestar.openapi.spec import Example
from litestar.params import Body

from cari.api.auth import requires
from cari.api.openapi import CollectionName, DocumentedAs, V1Operation
from cari.api.problems import responses
from cari.api.state import AppState
from cari.schema.tune import EfSearchTuneRequest, EfSearchTuning, FusionTuneRequest, FusionTuning
from cari.tune import ef_search, fusion
from cari.tune.evaluate import judged
from cari.tune.requests import strictly

SAMPLED = Example(
    summary="200 of the collection's chunks as questions, recall@10 of 0.99",
    value={"sample": 200, "k": 10, "recall": 0.99},
)


@post(
    "/collections/{collection:str}/tune/ef-search",
    summary="Measure HNSW recall and latency per ef_search",
    description=(
        "For each ef_search (`values`), the mean recall@k of the collection's HNSW index "
        "against the exact top k (every vector read, in the same snapshot), with its 95 % "
        "bootstrap interval, the searches' p50/p95 latency, and whether PostgreSQL walked the "
        "HNSW index (`index_used`; a small collection may be read exactly instead); "
        "`recommended` is the smallest value walking the index that reaches `recall`, null "
        "when none does. Questions: `questions`, embedded as searches embed them, or "
        "key-phrase questions made of `sample` chunks of the collection. `filters` as a "
        "search's: recall within what they allow. `apply: true` stores the recommendation as "
        "the collection's `ef_search`, which searches use when the request sets none. Takes "
        "seconds to minutes: 200 questions at 10 values are 2,400 searches."
    ),
    status_code=200,
    tags=["collections"],
    operation_id="tuneEfSearch",
    responses=responses(400, 404, 413, 422, 503),
    operation_class=V1Operation,
    opt=requires("collections:manage"),
)
async def tune_ef_search(
    state: AppState,
    collection: CollectionName,
    data: Annotated[dict[str, Any], DocumentedAs(EfSearchTuneRequest), Body(examples=[SAMPLED])],
) -> EfSearchTuning:
    rt = state.runtime
    request = strictly(data, EfSearchTuneRequest)
    return await ef_search.tune(rt.pool, collection, request, rt.embedders, rt.settings)


@post(
    "/collections/{collection:str}/tune/fusion",
    summary="Find the fusion that ranks judged questions best",
    description=(
        "Each fusion method (zscore, minmax, rrf) at vector shares 0.1-0.9, and the "
        "collection's defaults, searched as hybrid for every judged question; nDCG@10 per "
        "configuration, and the gain of the best over the defaults by cross-validation (each "
        "of `folds` scored with the configuration best on the others), with its 95 % "
        "bootstrap interval. `apply: true` stores the best as the collection's defaults only "
        "when that interval lies above zero. 28 searches per question."
    ),
    status_code=200,
    tags=["collections"],
    operation_id="tuneFusion",
    responses=responses(400, 404, 413, 422, 503),
    operation_class=V1Operation,
    opt=requires("collections:manage"),
)
async def tune_fusion(
    state: AppState,
    collection: CollectionName,
    data: Annotated[dict[str, Any], DocumentedAs(FusionTuneRequest), Body()],
) -> FusionTuning:
    rt = state.runtime
    request = strictly(data, FusionTuneRequest)
    return await fusion.tune(
        rt.searcher,
        rt.pool,
        collection,
        judged(request.questions),
        folds=request.folds,
        apply=request.apply,
    )
