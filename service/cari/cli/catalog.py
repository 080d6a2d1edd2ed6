"""`cari catalog` and `cari rates`: load structured sources from CSV or JSON Lines, list them.

An import is all or nothing: every row of every file is checked first, and any bad row is
reported as FILE:LINE with nothing written (exit status 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from cari.cli.common import print_table, run, user_errors

if TYPE_CHECKING:
    from decimal import Decimal

    from cari.catalog.imports import Format
    from cari.runtime import Runtime
    from cari.schema.catalog import CatalogItem, FinancingRate, ItemResult, RateResult

FILES = click.argument(
    "files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, allow_dash=True)
)
COLLECTION = click.option("-c", "--collection", required=True, help="Collection to load into.")
FORMAT = click.option(
    "--format",
    "fmt",
    type=click.Choice(["csv", "jsonl"]),
    help="File format (default: from the extension: .csv, .jsonl, .ndjson; stdin is jsonl).",
)


def _stop_on(errors: Sequence[str]) -> None:
    if errors:
        for error in errors:
            click.echo(error, err=True)
        click.echo(f"{len(errors)} bad rows: nothing written", err=True)
        raise SystemExit(1)


@click.group(help="Products (price, specs) that pricing and specs questions are answered from.")
def catalog() -> None:
    pass


@catalog.command(
    name="import",
    help="Add or update catalog items (by SKU) from CSV or JSON Lines files; '-' reads stdin. "
    "CSV: a header row; the columns sku, name, variant, price, currency are the item's fields "
    "and every other column is an attribute (a spec) named by its header. In an attribute cell "
    "a plain decimal number (7, 1.5) becomes a number, true/false a boolean, anything else "
    "stays text (1.5L, 007); empty cells are left out. JSON Lines: one item object per line, "
    "as in POST /v1/collections/{collection}/catalog. Each item is embedded on the way in.",
)
@FILES
@COLLECTION
@FORMAT
@user_errors
def import_catalog(files: tuple[str, ...], collection: str, fmt: Format | None) -> None:
    from cari.catalog import imports, store

    loaded = imports.load_catalog(files, fmt)
    _stop_on(loaded.errors)

    async def work(rt: Runtime) -> list[ItemResult]:
        return await store.import_items(
            rt.pool,
            rt.embedders,
            collection,
            loaded.items,
            batch_size=rt.settings.max_batch_documents,
        )

    results = run(work)
    created = sum(result.status == "created" for result in results)
    click.echo(f"{collection}: {created} items created, {len(results) - created} updated")


@catalog.command(name="list", help="List the catalog items of a collection by SKU.")
@click.option("-c", "--collection", required=True, help="Collection to list.")
@click.option("--limit", type=click.IntRange(1, 100_000), default=1000, show_default=True)
@click.option("--offset", type=click.IntRange(0), default=0, show_default=True)
@user_errors
def list_catalog(collection: str, limit: int, offset: int) -> None:
    from cari.catalog import store

    async def work(rt: Runtime) -> list[CatalogItem]:
        async with rt.pool.connection() as conn:
            return await store.list_items(conn, collection, limit=limit, offset=offset)

    print_table(
        ("sku", "name", "variant", "price", "attributes"),
        [
            (
                item.sku,
                item.name,
                item.variant,
                "" if item.price is None else f"{item.currency} {item.price:,}",
                "; ".join(f"{k}: {store.spec_text(v)}" for k, v in item.attributes.items()),
            )
            for item in run(work)
        ],
    )


@click.group(help="Financing rates that installment questions are answered from.")
def rates() -> None:
    pass


@rates.command(
    name="import",
    help="Add or update financing rates (by provider, tenor and rate type) from CSV or JSON "
    "Lines files; '-' reads stdin. Columns or fields: provider, tenor_months (1-600), rate "
    "(yearly, as a fraction: 0.085 is 8.5 %/year), rate_type (flat or annuity), and optionally "
    "min_down_payment (a fraction of the price).",
)
@FILES
@COLLECTION
@FORMAT
@user_errors
def import_rates(files: tuple[str, ...], collection: str, fmt: Format | None) -> None:
    from cari.catalog import imports, store

    loaded = imports.load_rates(files, fmt)
    _stop_on(loaded.errors)

    async def work(rt: Runtime) -> list[RateResult]:
        async with rt.pool.connection() as conn:
            return await store.import_rates(conn, collection, loaded.items)

    results = run(work)
    created = sum(result.status == "created" for result in results)
    click.echo(f"{collection}: {created} rates created, {len(results) - created} updated")


@rates.command(name="list", help="List the financing rates of a collection.")
@click.option("-c", "--collection", required=True, help="Collection to list.")
@user_errors
def list_rates(collection: str) -> None:
    from cari.catalog import store

    async def work(rt: Runtime) -> list[FinancingRate]:
        async with rt.pool.connection() as conn:
            return await store.list_rates(conn, collection)

    print_table(
        ("provider", "tenor", "rate/year", "type", "min. down payment"),
        [
            (
                rate.provider,
                f"{rate.tenor_months} months",
                f"{_percent(rate.rate)} %",
                rate.rate_type,
                f"{_percent(rate.min_down_payment)} %",
            )
            for rate in run(work)
        ],
    )


def _percent(fraction: Decimal) -> str:
    return format((fraction * 100).normalize(), "f")
