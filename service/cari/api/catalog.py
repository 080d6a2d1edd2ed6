"""Structured sources under /v1/collections/{collection}: catalog items and financing rates."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import psycopg
from litestar import Controller, Request, delete, get, post
from litestar.di import NamedDependency
from litestar.openapi.spec import Example
from litestar.params import Body, Parameter

from cari import limits
from cari.api.auth import requires
from cari.api.openapi import CollectionName, DocumentedAs, V1Operation
from cari.api.path_ids import path_id, whole_collection
from cari.api.problems import responses
from cari.api.state import AppState
from cari.catalog import store
from cari.errors import InvalidInput
from cari.ingest.pipeline import Ingestor
from cari.schema.catalog import (
    CatalogImport,
    CatalogItem,
    CatalogItemIn,
    FinancingRate,
    FinancingRateIn,
    RatesImport,
)
from cari.schema.documents import Deleted
from cari.settings import Settings

Conn = NamedDependency[psycopg.AsyncConnection[Any]]


# Checked item by item, so an error names `items[i].field`.
Items = Annotated[
    list[Any],
    DocumentedAs(list[CatalogItemIn]),
    Body(
        examples=[
            Example(
                summary="A car",
                value=[
                    {
                        "sku": "CIVIC-RS",
                        "name": "Honda Civic",
                        "variant": "RS",
                        "price": 600000000,
                        "attributes": {"engine": "1.5L turbo", "seats": 5},
                    }
                ],
            )
        ]
    ),
]
Rates = Annotated[
    list[Any],
    DocumentedAs(list[FinancingRateIn]),
    Body(
        examples=[
            Example(
                summary="Three years, flat",
                value=[
                    {
                        "provider": "BCA Finance",
                        "tenor_months": 36,
                        "rate": 0.05,
                        "rate_type": "flat",
                        "min_down_payment": 0.2,
                    }
                ],
            )
        ]
    ),
]
Sku = Annotated[
    Path,
    Parameter(
        description="The item's SKU, percent-encoded: '/' as %2F, '.' as %2E (exact; a SKU may "
        "hold '/', but not only '/')",
        examples=[Example(value="CIVIC-RS")],
        schema_extra={"format": None},  # Litestar calls a path parameter a URI
    ),
]


def _check_size(raw: list[Any], settings: Settings) -> None:
    if not raw:
        raise InvalidInput("items", "is empty")
    if len(raw) > settings.max_batch_documents:
        raise InvalidInput(
            "items",
            f"{len(raw)} items, over the limit of {settings.max_batch_documents} per request",
        )


def _sku(request: Request[Any, Any, Any], routed: Path) -> str:
    """The SKU, exactly as sent (it may hold '/')."""
    return path_id(request, routed, "catalog")


class CatalogController(Controller):
    path = "/collections/{collection:str}/catalog"
    tags = ["catalog"]  # noqa: RUF012 (Litestar reads this class attribute)

    @post(
        "/",
        summary="Add or update catalog items",
        description=(
            "Body: a list of items, each `sku`, `name`, optional `variant`, `price` (a number "
            "from 0 to below 10^18, rounded to cents, or a decimal string such as "
            '"600000000.50": digits, at most 2 decimals, kept as written), `currency` (3 '
            "upper-case letters, default IDR) and `attributes` (an object of specs). Items are "
            "matched by SKU, each SKU at most once per request. All or nothing: one invalid item "
            "rejects the batch with 422 naming `items[i].field`. Each item is embedded on the way "
            "in; prices come back as exact decimal strings."
        ),
        status_code=200,
        operation_id="addCatalogItems",
        opt=requires("collections:manage"),
        responses=responses(400, 404, 413, 422, 503),
        operation_class=V1Operation,
        guards=[whole_collection],
    )
    async def add(self, state: AppState, collection: CollectionName, data: Items) -> CatalogImport:
        settings: Settings = state.settings
        _check_size(data, settings)
        items = store.catalog_batch(data)
        ingestor: Ingestor = state.runtime.ingestor
        results = await store.import_items(
            state.runtime.pool,
            ingestor.embedders,
            collection,
            items,
            batch_size=settings.max_batch_documents,
        )
        return CatalogImport(results)

    @get(
        "/",
        summary="List catalog items by SKU",
        operation_id="listCatalogItems",
        opt=requires("documents:read"),
        responses=responses(404, 422, 503),
        operation_class=V1Operation,
        guards=[whole_collection],
    )
    async def index(
        self,
        conn: Conn,
        collection: CollectionName,
        limit: Annotated[int, Parameter(ge=1, le=limits.MAX_PAGE_LIMIT)] = limits.PAGE_LIMIT,
        offset: Annotated[int, Parameter(ge=0, le=limits.MAX_OFFSET)] = 0,
    ) -> list[CatalogItem]:
        return await store.list_items(conn, collection, limit=limit, offset=offset)

    @get(
        "/{sku:path}",
        summary="A catalog item",
        operation_id="getCatalogItem",
        opt=requires("documents:read"),
        responses=responses(404, 422, 503),
        operation_class=V1Operation,
    )
    async def read(
        self, request: Request[Any, Any, Any], conn: Conn, collection: CollectionName, sku: Sku
    ) -> CatalogItem:
        return await store.get_item(conn, collection, _sku(request, sku))

    @delete(
        "/{sku:path}",
        summary="Delete a catalog item",
        operation_id="deleteCatalogItem",
        opt=requires("collections:manage"),
        responses=responses(404, 422, 503),
        operation_class=V1Operation,
    )
    async def remove(
        self, request: Request[Any, Any, Any], conn: Conn, collection: CollectionName, sku: Sku
    ) -> None:
        await store.delete_item(conn, collection, _sku(request, sku))

    @delete(
        "/",
        summary="Delete every catalog item of the collection",
        status_code=200,
        operation_id="clearCatalog",
        opt=requires("collections:manage"),
        responses=responses(404, 422, 503),
        operation_class=V1Operation,
        guards=[whole_collection],
    )
    async def clear(self, conn: Conn, collection: CollectionName) -> Deleted:
        return Deleted(await store.clear_items(conn, collection))


class FinancingRatesController(Controller):
    path = "/collections/{collection:str}/financing-rates"
    tags = ["catalog"]  # noqa: RUF012 (Litestar reads this class attribute)

    @post(
        "/",
        summary="Add or update financing rates",
        description=(
            "Body: a list of rates, each `provider`, `tenor_months` (1-600), `rate` (yearly, "
            "as a fraction: 0.085 is 8.5 %/year), `rate_type` (flat or annuity) and optional "
            "`min_down_payment` (a fraction of the price). A fraction is a number from 0 to below "
            '1, rounded to 6 decimals, or a decimal string such as "0.085" (at most 6 '
            "decimals, kept as written). Matched by provider, tenor and rate type, each at most "
            "once per request (a 422 names the later `items[i].provider`). All or nothing, as "
            "for catalog items."
        ),
        status_code=200,
        operation_id="addFinancingRates",
        opt=requires("collections:manage"),
        responses=responses(400, 404, 413, 422, 503),
        operation_class=V1Operation,
    )
    async def add(
        self, conn: Conn, state: AppState, collection: CollectionName, data: Rates
    ) -> RatesImport:
        _check_size(data, state.settings)
        rates = store.rates_batch(data)
        return RatesImport(await store.import_rates(conn, collection, rates))

    @get(
        "/",
        summary="List financing rates",
        operation_id="listFinancingRates",
        opt=requires("documents:read"),
        responses=responses(404, 422, 503),
        operation_class=V1Operation,
    )
    async def index(self, conn: Conn, collection: CollectionName) -> list[FinancingRate]:
        return await store.list_rates(conn, collection)

    @delete(
        "/",
        summary="Delete every financing rate of the collection",
        status_code=200,
        operation_id="clearFinancingRates",
        opt=requires("collections:manage"),
        responses=responses(404, 422, 503),
        operation_class=V1Operation,
    )
    async def clear(self, conn: Conn, collection: CollectionName) -> Deleted:
        return Deleted(await store.clear_rates(conn, collection))
