"""`cari bm25 check` and `cari bm25 repair`: the keyword index against its chunks.

Both recount whole collections, which can take longer than the service's statement timeout:
they run without one.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from typing import TYPE_CHECKING, Any

import click

from cari.cli.common import run, settings, user_errors

if TYPE_CHECKING:
    import psycopg

    from cari.collection import KeywordIndexCheck
    from cari.runtime import Runtime


@click.group(help="Check or rebuild the keyword (BM25) index: postings and statistics.")
def bm25() -> None:
    pass


@bm25.command(
    help="Check every collection's BM25 index: each packed block decodes and agrees with its "
    "row (each damaged one named), then a recount from the chunks equals what is stored. "
    "Goes on through every collection; exits 1 if any is not exact."
)
@click.option("-c", "--collection", help="Only this collection.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout (for cron).")
@user_errors
def check(collection: str | None, as_json: bool) -> None:
    import cari.collection

    async def work(rt: Runtime) -> list[cari.collection.KeywordIndexCheck]:
        async with rt.pool.connection() as conn:
            return [
                await cari.collection.check_keyword_index(conn, name)
                for name in await _collection_names(conn, collection)
            ]

    checks = run(work, settings(statement_timeout_ms=0))
    statuses = Counter(c.status for c in checks)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "collections": [
                        {
                            "collection": c.collection,
                            "status": c.status,
                            "damaged_blocks": [dataclasses.asdict(b) for b in c.damaged],
                            "differences": c.differences,
                            "error": c.error,
                        }
                        for c in checks
                    ],
                    "summary": dict(statuses),
                }
            )
        )
    else:
        for c in checks:
            click.echo(_described(c))
        summary = ", ".join(f"{count} {status}" for status, count in statuses.items())
        click.echo(f"checked {len(checks)} collection(s): {summary}", err=True)
    if set(statuses) - {"exact"}:
        raise SystemExit(1)


def _described(c: KeywordIndexCheck) -> str:
    if c.status == "unchecked":
        return f"{c.collection}: could not be checked: {c.error}"
    if c.status == "damaged":
        blocks = "".join(f"\n  {block}" for block in c.damaged)
        return (
            f"{c.collection}: damaged: {len(c.damaged)} block(s) do not read{blocks}\n"
            f"  (`cari bm25 repair -c {c.collection}` rewrites them from the chunks; the recount "
            "follows the repair)"
        )
    found = ", ".join(f"{count} {kind}" for kind, count in c.differences.items() if count)
    return f"{c.collection}: {'differs: ' + found if found else 'exact'}"


@bm25.command(help="Recompute every collection's BM25 index from its chunks.")
@click.option("-c", "--collection", help="Only this collection.")
@user_errors
def repair(collection: str | None) -> None:
    import cari.collection

    async def work(rt: Runtime) -> list[str]:
        async with rt.pool.connection() as conn:
            names = await _collection_names(conn, collection)
            for name in names:
                await cari.collection.rebuild_keyword_index(conn, name)
            return names

    for name in run(work, settings(statement_timeout_ms=0)):
        click.echo(f"{name}: rebuilt")


async def _collection_names(conn: psycopg.AsyncConnection[Any], only: str | None) -> list[str]:
    import cari.collection

    if only is not None:
        return [(await cari.collection.get(conn, only)).name]
    return [c.name for c in await cari.collection.list_all(conn)]
