"""POST /v1/collections/{collection}/search."""

from __future__ import annotations

from typing import Annotated

from litestar import post
from litestar.openapi.spec import Example
from litestar.params import Body

from cari.api.auth import requires
from cari.api.consistency import READS_ONLY, ConsistencyToken, token
from cari.api.openapi import CollectionName, V1Operation
from cari.api.problems import responses
from cari.api.state import AppState
from cari.schema.search import SearchRequest, SearchResponse

QUESTION = Example(
    summary="A question",
    value={"query": "berapa cicilan honda civic dp 150 juta tenor 3 tahun?", "top_k": 5},
)


@post(
    "/collections/{collection:str}/search",
    summary="Search a collection",
    description=(
        "Modes: hybrid (keyword and vector in parallel, fused), vector, keyword. Unset fields "
        'take the collection\'s defaults. A question comparing things ("A vs B", "A atau '
        'B") is split into sub-queries, each represented in the results. The top k come back '
        "ranked, each with its 0-1 `relevance` and its `band` (strong from 0.5, moderate from "
        "0.3, weak below). A `threshold` (in the request, or the collection's "
        "`search_threshold`) drops the results below it, and all of them when none reaches "
        "it; answers apply the collection's `threshold`. Questions about prices, specs or "
        "installments also get catalog items and "
        "computed installments as sources, before the document chunks. A query holding an "
        "exact token (SKU, error code, id, version) boosts the keyword weight. `filters`: "
        '{"metadata": {"key": value | {"in": [...]} | {"gte": x, "lte": y}}, '
        '"document_ids": [...]}. `explain: true` adds the plan and per-stage timings. '
        "With read replicas the search runs on one (`explain.served_by` names it); send a "
        "write's `Cari-Consistency-Token` to see that write."
    ),
    status_code=200,
    tags=["search"],
    operation_id="searchCollection",
    responses=responses(400, 404, 413, 422, 503),
    operation_class=V1Operation,
    opt={**READS_ONLY, **requires("search")},
)
async def search(
    state: AppState,
    collection: CollectionName,
    data: Annotated[SearchRequest, Body(examples=[QUESTION])],
    consistency: ConsistencyToken = None,
) -> SearchResponse:
    searcher = state.runtime.searcher
    return await searcher.search(collection, data, token=token(consistency))
