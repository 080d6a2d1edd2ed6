"""Structured sources under /v1/collections/{collection}: catalog items and financing rates."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import msgspec
import psycopg
from litestar import Controller, delete, get, post
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody, Parameter

from cari.catalog import store
from cari.catalog.store import CatalogItem, FinancingRate, ItemResult, RateResult
from cari.errors import InvalidInput
from cari.ingest.pipeline import Ingestor
from cari.settings import Settings

Conn = NamedDependency[psycopg.AsyncConnection[Any]]


class CatalogImport(msgspec.Struct):
    results: list[ItemResult]


class RatesImport(msgspec.Struct):
    results: list[RateResult]


def _check_size(raw: list[Any], settings: Settings) -> None:
    if not raw:
        raise InvalidInput("items", "is empty")
    if len(raw) > settings.max_batch_documents:
        raise InvalidInput(
            "items",
            f"{len(raw)} items, over the limit of {settings.max_batch_documents} per request",
        )


def _sku(path: Path) -> str:
    """The SKU from a path parameter, which may hold '/'."""
    return path.as_posix().removeprefix("/")


class CatalogController(Controller):
    path = "/collections/{collection:str}/catalog"
    tags = ["catalog"]  # noqa: RUF012 (Litestar reads this class attribute)

    @post(
        "/",
        summary="Add or update catalog items",
        description=(
            "Body: a list of items, each `sku`, `name`, optional `variant`, `price` (≥ 0), "
            "`currency` (3 upper-case letters, default IDR) and `attributes` (an object of "
            "specs). Items are matched by SKU. All or nothing: one invalid item rejects the "
            "batch with 422 naming `items[i].field`. Each item is embedded on the way in; "
            "prices come back as exact decimal strings."
        ),
        status_code=200,
    )
    async def add(
        self, state: State, collection: FromPath[str], data: JSONBody[list[Any]]
    ) -> CatalogImport:
        settings: Settings = state.settings
        _check_size(data, settings)
        items = store.catalog_batch(data)
        ingestor: Ingestor = state.ingestor
        results = await store.import_items(
            state.pool,
            ingestor.embedder,
            collection,
            items,
            batch_size=settings.max_batch_documents,
        )
        return CatalogImport(results)

    @get("/", summary="List catalog items by SKU")
    async def list(
        self,
        conn: Conn,
        collection: FromPath[str],
        limit: Annotated[int, Parameter(ge=1, le=1000)] = 100,
        offset: Annotated[int, Parameter(ge=0)] = 0,
    ) -> list[CatalogItem]:
        return await store.list_items(conn, collection, limit=limit, offset=offset)

    @get("/{sku:path}", summary="A catalog item")
    async def read(self, conn: Conn, collection: FromPath[str], sku: FromPath[Path]) -> CatalogItem:
        return await store.get_item(conn, collection, _sku(sku))

    @delete("/{sku:path}", summary="Delete a catalog item")
    async def remove(self, conn: Conn, collection: FromPath[str], sku: FromPath[Path]) -> None:
        await store.delete_item(conn, collection, _sku(sku))

    @delete("/", summary="Delete every catalog item of the collection", status_code=200)
    async def clear(self, conn: Conn, collection: FromPath[str]) -> dict[str, int]:
        return {"deleted": await store.clear_items(conn, collection)}


class FinancingRatesController(Controller):
    path = "/collections/{collection:str}/financing-rates"
    tags = ["catalog"]  # noqa: RUF012 (Litestar reads this class attribute)

    @post(
        "/",
        summary="Add or update financing rates",
        description=(
            "Body: a list of rates, each `provider`, `tenor_months` (1-600), `rate` (yearly, "
            "as a fraction: 0.085 is 8.5 %/year), `rate_type` (flat or annuity) and optional "
            "`min_down_payment` (a fraction of the price). Matched by provider, tenor and rate "
            "type. All or nothing, as for catalog items."
        ),
        status_code=200,
    )
    async def add(
        self, conn: Conn, state: State, collection: FromPath[str], data: JSONBody[list[Any]]
    ) -> RatesImport:
        _check_size(data, state.settings)
        rates = store.rates_batch(data)
        return RatesImport(await store.import_rates(conn, collection, rates))

    @get("/", summary="List financing rates")
    async def list(self, conn: Conn, collection: FromPath[str]) -> list[FinancingRate]:
        return await store.list_rates(conn, collection)

    @delete("/", summary="Delete every financing rate of the collection", status_code=200)
    async def clear(self, conn: Conn, collection: FromPath[str]) -> dict[str, int]:
        return {"deleted": await store.clear_rates(conn, collection)}
