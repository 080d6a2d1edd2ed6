"""`cari bm25 check` and `cari bm25 repair`: the keyword index against its chunks.

Both recount whole collections, which can take longer than the service's statement timeout:
they run without one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from cari.cli.common import run, settings, user_errors

if TYPE_CHECKING:
    import psycopg

    from cari.runtime import Runtime


@click.group(help="Check or rebuild the keyword (BM25) index: postings and statistics.")
def bm25() -> None:
    pass


@bm25.command(help="Recount every collection's BM25 index from its chunks and compare.")
@click.option("-c", "--collection", help="Only this collection.")
@user_errors
def check(collection: str | None) -> None:
    import cari.collection

    async def work(rt: Runtime) -> dict[str, dict[str, int]]:
        async with rt.pool.connection() as conn:
            return {
                name: await cari.collection.keyword_index_differences(conn, name)
                for name in await _collection_names(conn, collection)
            }

    differences = run(work, settings(statement_timeout_ms=0))
    for name, kinds in differences.items():
        found = ", ".join(f"{count} {kind}" for kind, count in kinds.items() if count)
        click.echo(f"{name}: {'differs: ' + found if found else 'exact'}")
    if any(any(kinds.values()) for kinds in differences.values()):
        raise SystemExit(1)


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
