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
        "Modes: hybrid (keyword and vector in parallel, fused), vector, keyword. Unset fields "
        'take the collection\'s defaults. A question comparing things ("A vs B", "A atau '
        'B") is split into sub-queries, each represented in the results. Results below the '
        "`threshold` on the 0-1 relevance scale are dropped: an off-topic question returns "
        "none. Questions about prices, specs or installments also get catalog items and "
        "computed installments as sources, before the document chunks. A query holding an "
        "exact token (SKU, error code, id, version) boosts the keyword weight. `filters`: "
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
