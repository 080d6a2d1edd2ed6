"""The catalog (`…/catalog`) and financing rates (`…/financing-rates`): products with their
prices and specs, and the rates installments are computed from."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any, Literal

import msgspec

from cari.limits import MAX_TENOR_MONTHS

Status = Literal["created", "updated"]
RateType = Literal["flat", "annuity"]
TenorMonths = Annotated[int, msgspec.Meta(ge=1, le=MAX_TENOR_MONTHS)]

# An amount (a price, a rate, a down payment) is a JSON number, rounded half up to its column's
# step, or a decimal string, kept exactly: plain digits with at most the column's decimals.
# Each is at least 0 and, rounded, below its column's limit; a number is thus below `*_BELOW`.
PRICE_TEXT = r"^[0-9]{1,18}(\.[0-9]{1,2})?$"  # numeric(20, 2): below 10^18, in cents
PRICE_BELOW = Decimal("999999999999999999.995")
FRACTION_TEXT = r"^0(\.[0-9]{1,6})?$"  # numeric(9, 6), below 1: a rate, a down payment
FRACTION_BELOW = Decimal("0.9999995")


class CatalogItemIn(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A product: `attributes` holds its specs ({"engine": "1.5L", "seats": 7})."""

    sku: str
    name: str
    variant: str = ""
    price: Decimal | float | None = None
    currency: str = "IDR"
    attributes: dict[str, Any] = msgspec.field(default_factory=dict)


class FinancingRateIn(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """`rate` is yearly interest as a fraction (0.085 = 8.5 %/year); `min_down_payment` the
    smallest down payment as a fraction of the price."""

    provider: str
    tenor_months: TenorMonths
    rate: Decimal | float
    rate_type: RateType
    min_down_payment: Decimal | float = Decimal(0)


class CatalogItem(msgspec.Struct, kw_only=True):
    sku: str
    name: str
    variant: str
    price: Decimal | None
    currency: str
    attributes: dict[str, Any]
    created_at: datetime
    updated_at: datetime


class FinancingRate(msgspec.Struct, kw_only=True):
    provider: str
    tenor_months: int
    rate: Decimal
    rate_type: str
    min_down_payment: Decimal
    created_at: datetime
    updated_at: datetime


class ItemResult(msgspec.Struct):
    sku: str
    status: Status


class RateResult(msgspec.Struct):
    provider: str
    tenor_months: int
    rate_type: str
    status: Status


class CatalogImport(msgspec.Struct):
    results: list[ItemResult]


class RatesImport(msgspec.Struct):
    results: list[RateResult]
