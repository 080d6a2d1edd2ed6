"""Catalog items and financing rates: validation, embedding at import, upsert, read, delete.

A batch is all or nothing: every item is validated (and embedded) before the first row is
written, and the rows are written in one transaction.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Annotated, Any, Literal, TypeVar, cast, get_args, get_origin

import msgspec
import numpy as np
import psycopg
from psycopg.rows import kwargs_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from cari.db.queries import query
from cari.embed import Embedders
from cari.errors import MISSING_FIELD, UNKNOWN_FIELD, Conflict, InvalidInput, NotFound
from cari.ingest.store import CollectionRef, collection_ref, embedder_unchanged
from cari.limits import bounds, refuse_nul
from cari.schema.catalog import (
    FRACTION_BELOW,
    FRACTION_TEXT,
    PRICE_BELOW,
    PRICE_TEXT,
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
PRICE_LIMIT = Decimal(10) ** 18  # numeric(20, 2) holds less
CENT = Decimal("0.01")
RATE_STEP = Decimal("0.000001")  # numeric(9, 6)
CURRENCY = re.compile("[A-Z]{3}")  # an ISO 4217 code


# -- validation ---------------------------------------------------------------------------------


def catalog_item(raw: object) -> CatalogItemIn:
    """One item, validated and normalised (trimmed text, price in cents); errors name the field.
    A price may be a number or a decimal string (`_amount`)."""
    item = _convert(raw, CatalogItemIn, ("price",))
    sku = _text("sku", item.sku, MAX_SKU_CHARACTERS)
    if not sku.strip("/"):  # a URL path cannot tell `…/catalog/%2F` from `…/catalog`
        raise InvalidInput("sku", "must hold a character other than '/'")
    name = _text("name", item.name)
    refuse_nul("variant", item.variant)
    refuse_nul("attributes", item.attributes)
    given = cast(dict[str, Any], raw).get("price")
    price = None if given is None else _amount("price", given, _PRICE)
    if not CURRENCY.fullmatch(item.currency):
        raise InvalidInput(
            "currency", f"must be 3 upper-case letters such as IDR or USD, not '{item.currency}'"
        )
    return msgspec.structs.replace(
        item, sku=sku, name=name, variant=item.variant.strip(), price=price
    )


def financing_rate(raw: object) -> FinancingRateIn:
    """One rate, validated and normalised; errors name the field (see `catalog_item`)."""
    rate = _convert(raw, FinancingRateIn, ("rate", "min_down_payment"))
    provider = _text("provider", rate.provider, MAX_PROVIDER_CHARACTERS)
    given = cast(dict[str, Any], raw)
    yearly = _amount("rate", given["rate"], _YEARLY)
    down = _amount("min_down_payment", given.get("min_down_payment", 0), _DOWN)
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


def _convert(raw: object, kind: type[S], amounts: tuple[str, ...] = ()) -> S:
    """`raw` as `kind`; the `amounts` it holds are left to `_amount`, which reads them as sent."""
    if not isinstance(raw, dict):
        raise InvalidInput("item", f"must be an object, not {type(raw).__name__}")
    # JSON does not tell 36.0 from 36, nor does the OpenAPI document's `integer`: a whole number
    # is one however it is written.
    fields = {key: _whole(value) for key, value in raw.items()}
    try:
        return msgspec.convert({**fields, **dict.fromkeys(set(amounts) & raw.keys(), 0)}, kind)
    except msgspec.ValidationError as exc:
        error = InvalidInput.from_msgspec(str(exc), "item")
        # An item's report says it in words of its own: "items[3].colour: is not a known field".
        if error.reason.startswith(MISSING_FIELD):
            raise InvalidInput(error.field, "is required") from None
        if error.reason.startswith(UNKNOWN_FIELD):
            raise InvalidInput(error.field, "is not a known field") from None
        # A choice or a range its type states, in words: "must be 'flat' or 'annuity', not …".
        allowed = {f.name: f.type for f in msgspec.structs.fields(kind)}.get(error.field)
        if error.reason.startswith("Invalid enum value") and get_origin(allowed) is Literal:
            named = " or ".join(f"'{choice}'" for choice in get_args(allowed))
            raise InvalidInput(error.field, f"must be {named}, not '{raw[error.field]}'") from None
        if re.match(r"Expected `int` [<>]=", error.reason) and get_origin(allowed) is Annotated:
            least, greatest = bounds(allowed)
            raise InvalidInput(
                error.field, f"must be {least} to {greatest}, not {raw[error.field]}"
            ) from None
        raise error from None


def _whole(value: object) -> object:
    """A float with no fraction (an exact integer) as an int; any other value as it is."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= 2**53:
        return int(value)
    return value


@dataclass(frozen=True)
class _Kind:
    """What an amount is: its decimal strings' `pattern` (`example` one), the bound a number
    stays `below`, the `step` it is rounded to, and what the value is in words (`what`, `unit`;
    a price has none)."""

    pattern: str
    example: str
    below: Decimal
    step: Decimal
    decimals: int
    what: str = ""
    unit: str = ""


_PRICE = _Kind(PRICE_TEXT, "'600000000.50'", PRICE_BELOW, CENT, 2)
_YEARLY = _Kind(
    FRACTION_TEXT, "'0.085'", FRACTION_BELOW, RATE_STEP, 6, "a yearly fraction", "%/year"
)
_DOWN = _Kind(FRACTION_TEXT, "'0.2'", FRACTION_BELOW, RATE_STEP, 6, "a fraction of the price", "%")


def _amount(field: str, value: object, kind: _Kind) -> Decimal:
    """`value`, a number or a decimal string, as an exact decimal at the column's step. A number
    is rounded half up (a float read as its shortest form: 0.1, not 0.1000000000000000055...); a
    string must match `kind.pattern` (plain digits, at most the column's decimals), so it is
    stored as written. Whatever else is wrong is said first: a negative, a percentage, too big."""
    if isinstance(value, str):
        try:
            number = Decimal(value)
        except InvalidOperation:
            raise InvalidInput(
                field, f"must be a number or a decimal string such as {kind.example}, not '{value}'"
            ) from None
    elif isinstance(value, int | float | Decimal) and not isinstance(value, bool):
        number = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    else:
        raise InvalidInput(field, f"must be a number or a decimal string, not {_json_type(value)}")
    if not number.is_finite():
        raise InvalidInput(field, f"must be a finite number, not {value}")
    if number < 0:
        raise InvalidInput(field, "must be ≥ 0")
    if number >= kind.below and kind.what:
        raise InvalidInput(
            field,
            f"{_plain(number)} is {kind.what} below 1; {_plain(number)} {kind.unit} is "
            f"{_plain(number / 100)}",
        )
    if number >= kind.below:
        raise InvalidInput(field, f"must be below 10^18, not {_plain(number)}")
    if isinstance(value, str) and not re.search(kind.pattern, value):
        raise InvalidInput(
            field,
            f"as a string, must be plain digits with at most {kind.decimals} decimals, such as "
            f"{kind.example}, not '{value}'",
        )
    return number.quantize(kind.step, ROUND_HALF_UP)


def _json_type(value: object) -> str:
    """What JSON calls `value`'s type: null, boolean, array, object."""
    kinds = {type(None): "null", bool: "boolean", list: "array", dict: "object"}
    return kinds.get(type(value), type(value).__name__)


def _text(field: str, value: str, limit: int | None = None) -> str:
    value = value.strip()
    if not value:
        raise InvalidInput(field, "is empty")
    if limit is not None and len(value) > limit:
        raise InvalidInput(field, f"is {len(value)} characters, over the {limit} limit")
    refuse_nul(field, value)
    return value


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
