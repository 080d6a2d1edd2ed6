"""Structured sources for routed questions: catalog items (pricing, specs) and installments.

A sub-query routed to pricing, specs or financing searches the collection's catalog; the items
it names best (the highest relevance, at or above the threshold) become sources, each once,
with price and specs. A financing question also gets, per named product, the monthly payment of
every financing rate (or of the tenors it asks for), from the product's catalog price, or from
a price the question states when it names no product. The down payment is the one asked ("dp 50
juta", "uang muka 20%"), raised to the provider's minimum where lower. When nothing can be
computed the financing source says why (no rates loaded, no product named, no price), with
relevance 0 so it never passes for an answer; a question that names no product in a collection
with no rates gets none ("interest" meant something else there).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal, cast

import numpy as np
from psycopg_pool import AsyncConnectionPool

from cari.catalog.search import CatalogHit, FinancingRate, financing_rates, search_catalog
from cari.concurrency import all_or_none
from cari.db.vector_space import Space
from cari.search.amounts import FinancingTerms, parse_financing
from cari.search.installments import RateType, monthly_payment
from cari.search.router import Routing

PRODUCT_ROUTES = frozenset({"pricing", "specs", "financing"})


@dataclass(frozen=True, slots=True)
class StructuredSource:
    id: str
    kind: Literal["catalog", "financing"]
    title: str
    content: str
    metadata: dict[str, Any]
    relevance: float
    ranks: dict[str, tuple[int, float]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Found:
    sources: list[StructuredSource]
    explain: dict[str, Any]


async def sources(
    pool: AsyncConnectionPool,
    collection_id: int,
    text: str,
    parts: Sequence[tuple[str, np.ndarray | None, Routing]],
    space: Space | None,
    threshold: float,
    limit: int,
) -> Found:
    """The structured sources for `text`, whose sub-queries are `parts` (text, query vector,
    routing; `space` is the vectors'), most relevant first, at most `limit` catalog items."""
    routed = [(t, v) for t, v, r in parts if PRODUCT_ROUTES & set(r.routes)]
    financing = any("financing" in r.routes for _, _, r in parts)
    searches = await all_or_none(
        *(search_catalog(pool, collection_id, t, v, space, limit) for t, v in routed)
    )
    named: dict[str, CatalogHit] = {}
    explain: dict[str, Any] = {"catalog": []}
    for (part, _), hits in zip(routed, searches, strict=True):
        best = max((h.relevance for h in hits), default=0.0)
        chosen = [h for h in hits if h.relevance >= max(threshold, best) and h.relevance > 0]
        for hit in chosen:
            named.setdefault(hit.item.sku, hit)
        explain["catalog"].append(
            {"query": part, "hits": [_explain_hit(h, h in chosen) for h in hits]}
        )
    products = sorted(named.values(), key=lambda h: -h.relevance)[:limit]
    found = [_catalog_source(hit) for hit in products]
    if financing:
        terms = parse_financing(text)
        async with pool.connection() as conn:
            rates = await financing_rates(conn, collection_id)
        found += _financing_sources(products, terms, rates)
        explain["financing"] = {
            "down_payment": _number(terms.down_payment),
            "down_payment_share": _number(terms.down_payment_share),
            "tenors_months": list(terms.tenors_months),
            "price": _number(terms.price),
            "rates": len(rates),
            "notes": list(terms.notes),
        }
    return Found(found, explain)


def _catalog_source(hit: CatalogHit) -> StructuredSource:
    item = hit.item
    name = " ".join(filter(None, (item.name, item.variant)))
    lines = [f"{name} (SKU {item.sku})"]
    if item.price is not None:
        lines.append(f"Price: {_money(item.price, item.currency)}")
    lines += [f"{key}: {_value(value)}" for key, value in item.attributes.items()]
    ranks = {}
    if hit.keyword_rank is not None:
        ranks["keyword"] = (hit.keyword_rank, hit.relevance)
    if hit.vector_rank is not None and hit.cosine is not None:
        ranks["vector"] = (hit.vector_rank, hit.cosine)
    return StructuredSource(
        id=f"catalog:{item.sku}",
        kind="catalog",
        title=name,
        content="\n".join(lines),
        metadata={
            "sku": item.sku,
            "name": item.name,
            "variant": item.variant,
            "price": _number(item.price),
            "currency": item.currency,
            "attributes": item.attributes,
        },
        relevance=hit.relevance,
        ranks=ranks,
    )


def _financing_sources(
    products: Sequence[CatalogHit], terms: FinancingTerms, rates: Sequence[FinancingRate]
) -> list[StructuredSource]:
    if not rates:
        if not products:  # no catalog, no rates: "interest" meant something else here
            return []
        return [_status("no_rates", "No financing rates are loaded for this collection.")]
    priced: list[tuple[str, str, Decimal, str | None, float]] = [
        (hit.item.sku, hit.item.name, hit.item.price, hit.item.currency, hit.relevance)
        for hit in products
        if hit.item.price is not None
    ]
    if not priced and terms.price is not None:
        priced = [("question", "the price in the question", terms.price, None, 1.0)]
    if not priced:
        reason = (
            "The products named have no price in the catalog"
            if products
            else "No product in the catalog matches the question, and it states no price"
        )
        return [_status("no_product", f"{reason}: installments cannot be computed.")]
    chosen = [r for r in rates if not terms.tenors_months or r.tenor_months in terms.tenors_months]
    notes = list(terms.notes)
    if not chosen:
        available = ", ".join(str(t) for t in sorted({r.tenor_months for r in rates}))
        asked = ", ".join(str(t) for t in terms.tenors_months)
        notes.append(f"no rate for {asked} months (available: {available}); all rates shown")
        chosen = list(rates)
    return [
        _plans(sku, name, price, currency, relevance, terms, chosen, notes)
        for sku, name, price, currency, relevance in priced
    ]


def _plans(
    sku: str,
    name: str,
    price: Decimal,
    currency: str | None,
    relevance: float,
    terms: FinancingTerms,
    rates: Sequence[FinancingRate],
    notes: list[str],
) -> StructuredSource:
    asked = terms.down_payment
    if asked is None and terms.down_payment_share is not None:
        asked = price * terms.down_payment_share
    plans: list[dict[str, Any]] = []
    lines = [f"Installments for {name}, price {_money(price, currency)}:"]
    for rate in sorted(rates, key=lambda r: (r.provider, r.tenor_months, r.rate_type)):
        minimum = price * rate.min_down_payment
        down = max(asked if asked is not None else minimum, minimum)
        plan: dict[str, Any] = {
            "provider": rate.provider,
            "tenor_months": rate.tenor_months,
            "rate": _number(rate.rate),
            "rate_type": rate.rate_type,
            "down_payment": _number(down),
        }
        label = (
            f"{rate.provider}, {rate.tenor_months} months, {rate.rate_type} "
            f"{rate.rate * 100:.2f}%/year, down payment {_money(down, currency)}"
        )
        if asked is not None and asked < minimum:
            plan["note"] = "down payment raised to the provider's minimum"
        if down >= price:
            plan["note"] = "the down payment covers the price: nothing to finance"
            lines.append(f"- {label}: nothing to finance")
        else:
            due = monthly_payment(
                price - down, rate.rate, rate.tenor_months, cast(RateType, rate.rate_type)
            )
            plan |= {
                "principal": _number(due.principal),
                "monthly": _number(due.monthly),
                "total": _number(due.total),
                "interest": _number(due.interest),
            }
            lines.append(
                f"- {label}: {_money(due.monthly, currency)} per month "
                f"(financed {_money(due.principal, currency)}, total {_money(due.total, currency)})"
            )
        plans.append(plan)
    lines += [f"Note: {note}" for note in notes]
    return StructuredSource(
        id=f"financing:{sku}",
        kind="financing",
        title=f"Installments: {name}",
        content="\n".join(lines),
        metadata={
            "status": "computed",
            "sku": None if sku == "question" else sku,
            "price": _number(price),
            "currency": currency,
            "plans": plans,
            "notes": notes,
        },
        relevance=relevance,
    )


def _status(status: str, message: str) -> StructuredSource:
    return StructuredSource(
        id=f"financing:{status}",
        kind="financing",
        title="Installments",
        content=message,
        metadata={"status": status},
        relevance=0.0,
    )


def _explain_hit(hit: CatalogHit, chosen: bool) -> dict[str, Any]:
    return {
        "id": f"catalog:{hit.item.sku}",
        "name": hit.item.name,
        "relevance": round(hit.relevance, 4),
        "keyword_rank": hit.keyword_rank,
        "vector_rank": hit.vector_rank,
        "cosine": None if hit.cosine is None else round(hit.cosine, 4),
        "chosen": chosen,
    }


def _money(amount: Decimal, currency: str | None) -> str:
    shown = f"{amount:,.2f}".removesuffix(".00")
    return f"{currency} {shown}" if currency else shown


def _number(value: Decimal | None) -> float | None:
    return None if value is None else float(value)


def _value(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)
