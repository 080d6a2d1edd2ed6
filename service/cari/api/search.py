"""POST /v1/collections/{collection}/search."""

from __future__ import annotations

from litestar import post
from litestar.datastructures import State
from litestar.params import FromPath, JSONBody

from cari.search.engine import Searcher, SearchRequest, SearchResponse


@post(
    "/collections/{collection:str}/search",
    summary="Search a collection",
    description=(
        "Modes: hybrid (keyword and vector in parallel, fused by weighted RRF), vector, "
        "keyword. Unset fields take the collection's defaults. A query holding an exact token "
        "(SKU, error code, id, version) boosts the keyword weight. `filters`: "
        '{"metadata": {"key": value | {"in": [...]} | {"gte": x, "lte": y}}, '
        '"document_ids": [...]}. `explain: true` adds the plan and per-stage timings.'
    ),
    status_code=200,
    tags=["search"],
)
async def search(
    state: State, collection: FromPath[str], data: JSONBody[SearchRequest]
) -> SearchResponse:
    searcher: Searcher = state.searcher
    return await searcher.search(collection, data)
