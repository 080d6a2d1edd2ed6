"""Catalog items and financing rates: validation, embedding at import, upsert, read, delete.

A batch is all or nothing: every item is validated (and embedded) before the first row is
written, and the rows are written in one transaction.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterator, Sequence
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, TypeVar

import msgspec
import numpy as np
import psycopg
from psycopg.rows import kwargs_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from cari.db.queries import query
from cari.embed import Embedders
from cari.errors import MISSING_FIELD, UNKNOWN_FIELD, Conflict, InvalidInput, NotFound
from cari.ingest.store import CollectionRef, collection_ref, embedder_unchanged, json_strings
from cari.limits import MAX_TENOR_MONTHS
from cari.schema.catalog import (
    CatalogItem,
    CatalogItemIn,
    FinancingRate,
    FinancingRateIn,
    ItemResult,
    RateResult,
    Status,
)

Conn = psycopg.AsyncConnection[Any]
S = TypeVar("S", bound=msgspec.Struct)
T = TypeVar("T")

MAX_SKU_CHARACTERS = 200
MAX_PROVIDER_CHARACTERS = 200
RATE_TYPES = ("flat", "annuity")
PRICE_LIMIT = Decimal(10) ** 18  # numeric(20, 2) holds less
CENT = Decimal("0.01")
RATE_STEP = Decimal("0.000001")  # numeric(9, 6)
CURRENCY = re.compile("[A-Z]{3}")  # an ISO 4217 code


# -- validation ---------------------------------------------------------------------------------


def catalog_item(raw: object) -> CatalogItemIn:
    """One item, validated and normalised (trimmed text, price in cents); errors name the field.
    A price may be a number or a decimal string."""
    item = _convert(raw, CatalogItemIn)
    sku = _text("sku", item.sku, MAX_SKU_CHARACTERS)
    if not sku.strip("/"):  # a URL path cannot tell `…/catalog/%2F` from `…/catalog`
        raise InvalidInput("sku", "must hold a character other than '/'")
    name = _text("name", item.name)
    if "\x00" in item.variant:
        raise InvalidInput("variant", "contains a NUL character")
    if any("\x00" in text for text in json_strings(item.attributes)):
        raise InvalidInput("attributes", "contains a NUL character")
    price = None
    if item.price is not None:
        price = _number("price", item.price)
        if price >= PRICE_LIMIT or price.quantize(CENT, ROUND_HALF_UP) >= PRICE_LIMIT:
            raise InvalidInput("price", f"must be below 10^18, not {_plain(price)}")
        price = price.quantize(CENT, ROUND_HALF_UP)
    if not CURRENCY.fullmatch(item.currency):
        raise InvalidInput(
            "currency", f"must be 3 upper-case letters such as IDR or USD, not '{item.currency}'"
        )
    return msgspec.structs.replace(
        item, sku=sku, name=name, variant=item.variant.strip(), price=price
    )


def financing_rate(raw: object) -> FinancingRateIn:
    """One rate, validated and normalised; errors name the field (see `catalog_item`)."""
    rate = _convert(raw, FinancingRateIn)
    provider = _text("provider", rate.provider, MAX_PROVIDER_CHARACTERS)
    if not 1 <= rate.tenor_months <= MAX_TENOR_MONTHS:
        raise InvalidInput(
            "tenor_months", f"must be 1 to {MAX_TENOR_MONTHS} months, not {rate.tenor_months}"
        )
    if rate.rate_type not in RATE_TYPES:
        raise InvalidInput("rate_type", f"must be 'flat' or 'annuity', not '{rate.rate_type}'")
    yearly = _fraction("rate", rate.rate, "a yearly fraction", "%/year")
    down = _fraction("min_down_payment", rate.min_down_payment, "a fraction of the price", "%")
    return msgspec.structs.replace(rate, provider=provider, rate=yearly, min_down_payment=down)


def catalog_batch(raw_items: Sequence[object]) -> list[CatalogItemIn]:
    """Every item valid and each SKU once, or InvalidInput naming `items[i].field`."""
    items = [_at(i, catalog_item, raw) for i, raw in enumerate(raw_items)]
    if repeated := next(duplicates([item.sku for item in items]), None):
        later, earlier = repeated
        raise InvalidInput(
            f"items[{later}].sku", f"'{items[later].sku}' appears twice (also items[{earlier}])"
        )
    return items


def rates_batch(raw_rates: Sequence[object]) -> list[FinancingRateIn]:
    """Every rate valid and each provider + tenor + rate type once (see `catalog_batch`)."""
    rates = [_at(i, financing_rate, raw) for i, raw in enumerate(raw_rates)]
    if repeated := next(duplicates([rate_key(rate) for rate in rates]), None):
        later, earlier = repeated
        raise InvalidInput(
            f"items[{later}].provider",
            f"{describe_rate(rates[later])} appears twice (also items[{earlier}])",
        )
    return rates


def duplicates(keys: Sequence[Hashable]) -> Iterator[tuple[int, int]]:
    """(index, index of its first occurrence) for every key seen before."""
    first: dict[Hashable, int] = {}
    for index, key in enumerate(keys):
        if key in first:
            yield index, first[key]
        else:
            first[key] = index


def rate_key(rate: FinancingRateIn) -> tuple[str, int, str]:
    return rate.provider, rate.tenor_months, rate.rate_type


def describe_rate(rate: FinancingRateIn) -> str:
    return f"'{rate.provider}' {rate.tenor_months} months {rate.rate_type}"


def _at(index: int, validate: Callable[[object], T], raw: object) -> T:
    """`validate(raw)`, its error renamed to `items[index].field`."""
    try:
        return validate(raw)
    except InvalidInput as exc:
        where = f"items[{index}]" if exc.field == "item" else f"items[{index}].{exc.field}"
        raise InvalidInput(where, exc.message.removeprefix(f"{exc.field}: ")) from None


def _convert(raw: object, kind: type[S]) -> S:
    if not isinstance(raw, dict):
        raise InvalidInput("item", f"must be an object, not {type(raw).__name__}")
    try:
        return msgspec.convert(raw, kind)
    except msgspec.ValidationError as exc:
        error = InvalidInput.from_msgspec(str(exc), "item")
        # An item's report says it in words of its own: "items[3].colour: is not a known field".
        if error.reason.startswith(MISSING_FIELD):
            raise InvalidInput(error.field, "is required") from None
        if error.reason.startswith(UNKNOWN_FIELD):
            raise InvalidInput(error.field, "is not a known field") from None
        raise error from None


def _text(field: str, value: str, limit: int | None = None) -> str:
    value = value.strip()
    if not value:
        raise InvalidInput(field, "is empty")
    if limit is not None and len(value) > limit:
        raise InvalidInput(field, f"is {len(value)} characters, over the {limit} limit")
    if "\x00" in value:
        raise InvalidInput(field, "contains a NUL character")
    return value


def _number(field: str, value: Decimal | float) -> Decimal:
    """`value` as an exact decimal, finite and not negative. A float becomes its shortest
    decimal form (0.1, not 0.1000000000000000055...)."""
    number = Decimal(repr(value)) if isinstance(value, float) else value
    if not number.is_finite():
        raise InvalidInput(field, f"must be a finite number, not {value}")
    if number < 0:
        raise InvalidInput(field, "must be ≥ 0")
    return number


def _fraction(field: str, value: Decimal | float, what: str, unit: str) -> Decimal:
    """A fraction in [0, 1) at the column's precision; a percentage gets a hint."""
    number = _number(field, value)
    if number >= 1 or number.quantize(RATE_STEP, ROUND_HALF_UP) >= 1:
        raise InvalidInput(
            field,
            f"{_plain(number)} is {what} below 1; {_plain(number)} {unit} is "
            f"{_plain(number / 100)}",
        )
    return number.quantize(RATE_STEP, ROUND_HALF_UP)


def _plain(number: Decimal) -> str:
    """8.5, 100, 0.085: no exponent, no trailing zeros."""
    return format(number.normalize(), "f") if number < PRICE_LIMIT else f"{number:.4g}"


# -- embedding ----------------------------------------------------------------------------------


def item_text(item: CatalogItemIn) -> str:
    """What gets embedded: "name variant; key: value; ..." so that a paraphrased name or a
    question about one spec ("does it have Bluetooth?") lands near the item."""
    head = " ".join(part for part in (item.name, item.variant) if part)
    specs = [f"{key}: {spec_text(value)}" for key, value in item.attributes.items()]
    return "; ".join([head, *specs])


def spec_text(value: object) -> str:
    """An attribute value as text: booleans as yes or no, numbers and lists as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    return msgspec.json.encode(value).decode()


# -- writing ------------------------------------------------------------------------------------


async def import_items(
    pool: AsyncConnectionPool,
    embedders: Embedders,
    collection: str,
    items: Sequence[CatalogItemIn],
    *,
    batch_size: int,
) -> list[ItemResult]:
    """Embed the items with the collection's embedder (one call per `batch_size` items), then
    upsert them all in one transaction. An embedder failure raises EmbedderUnavailable before
    anything is written."""
    async with pool.connection() as conn:
        ref = await collection_ref(conn, collection)
    embedder = embedders.get(ref.embedder)
    vectors: list[np.ndarray] = []
    for start in range(0, len(items), batch_size):
        batch = items[start : start + batch_size]
        vectors.extend(await embedder.embed_documents([item_text(item) for item in batch]))
    statuses: dict[str, Status] = {}
    async with pool.connection() as conn, conn.transaction():
        if not await embedder_unchanged(conn, ref):
            raise Conflict(
                f"collection '{collection}' moved to another embedder during the import: "
                "send the items again"
            )
        for start in range(0, len(items), batch_size):
            end = start + batch_size
            statuses.update(await _upsert_items(conn, ref, items[start:end], vectors[start:end]))
    return [ItemResult(item.sku, statuses[item.sku]) for item in items]


async def _upsert_items(
    conn: Conn, collection: CollectionRef, items: Sequence[CatalogItemIn], vectors: Sequence[Any]
) -> dict[str, Status]:
    # Rows are locked in SKU order, so concurrent imports sharing items cannot deadlock.
    rows = sorted(zip(items, vectors, strict=True), key=lambda row: row[0].sku)
    cur = await conn.execute(
        query("catalog_upsert"),
        {
            "collection_id": collection.id,
            "skus": [item.sku for item, _ in rows],
            "names": [item.name for item, _ in rows],
            "variants": [item.variant for item, _ in rows],
            "prices": [item.price for item, _ in rows],
            "currencies": [item.currency for item, _ in rows],
            "attributes": [Jsonb(item.attributes) for item, _ in rows],
            "embeddings": [vector for _, vector in rows],
        },
    )
    return {str(sku): "created" if created else "updated" for sku, created in await cur.fetchall()}


async def import_rates(
    conn: Conn, collection: str, rates: Sequence[FinancingRateIn]
) -> list[RateResult]:
    """Upsert the rates by provider + tenor + rate type, all in one transaction."""
    ref = await collection_ref(conn, collection)
    rows = sorted(rates, key=rate_key)
    async with conn.transaction():
        cur = await conn.execute(
            query("financing_upsert"),
            {
                "collection_id": ref.id,
                "providers": [rate.provider for rate in rows],
                "tenors": [rate.tenor_months for rate in rows],
                "rates": [rate.rate for rate in rows],
                "rate_types": [rate.rate_type for rate in rows],
                "min_down_payments": [rate.min_down_payment for rate in rows],
            },
        )
        written = await cur.fetchall()
    statuses: dict[tuple[str, int, str], Status] = {
        (str(provider), int(tenor), str(kind)): "created" if created else "updated"
        for provider, tenor, kind, created in written
    }
    return [
        RateResult(rate.provider, rate.tenor_months, rate.rate_type, statuses[rate_key(rate)])
        for rate in rates
    ]


# -- reading and deleting -----------------------------------------------------------------------


async def list_items(conn: Conn, collection: str, *, limit: int, offset: int) -> list[CatalogItem]:
    """The collection's items in SKU order."""
    ref = await collection_ref(conn, collection)
    async with conn.cursor(row_factory=kwargs_row(CatalogItem)) as cur:
        await cur.execute(
            query("catalog_list"), {"collection_id": ref.id, "limit": limit, "offset": offset}
        )
        return await cur.fetchall()


async def get_item(conn: Conn, collection: str, sku: str) -> CatalogItem:
    ref = await collection_ref(conn, collection)
    async with conn.cursor(row_factory=kwargs_row(CatalogItem)) as cur:
        await cur.execute(query("catalog_get"), {"collection_id": ref.id, "sku": sku})
        item = await cur.fetchone()
    if item is None:
        raise NotFound(f"catalog item '{sku}' does not exist in '{collection}'")
    return item


async def delete_item(conn: Conn, collection: str, sku: str) -> None:
    ref = await collection_ref(conn, collection)
    cur = await conn.execute(query("catalog_delete"), {"collection_id": ref.id, "sku": sku})
    if await cur.fetchone() is None:
        raise NotFound(f"catalog item '{sku}' does not exist in '{collection}'")


async def clear_items(conn: Conn, collection: str) -> int:
    ref = await collection_ref(conn, collection)
    cur = await conn.execute(query("catalog_clear"), {"collection_id": ref.id})
    return cur.rowcount


async def financing_rates(conn: Conn, collection_id: int) -> list[FinancingRate]:
    """The collection's rates by provider, tenor and rate type."""
    async with conn.cursor(row_factory=kwargs_row(FinancingRate)) as cur:
        await cur.execute(query("financing_list"), {"collection_id": collection_id})
        return await cur.fetchall()


async def list_rates(conn: Conn, collection: str) -> list[FinancingRate]:
    return await financing_rates(conn, (await collection_ref(conn, collection)).id)


async def clear_rates(conn: Conn, collection: str) -> int:
    ref = await collection_ref(conn, collection)
    cur = await conn.execute(query("financing_clear"), {"collection_id": ref.id})
    return cur.rowcount
