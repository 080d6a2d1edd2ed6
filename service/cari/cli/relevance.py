"""`cari refit`: fit collections' relevance scales to their content now (cari.search.fit)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from cari.cli.common import run, settings, user_errors

if TYPE_CHECKING:
    from cari.runtime import Runtime


@click.command(
    help="Fit the relevance scale of a collection (or every one) to its content now. Searches "
    "use the fit unless the collection sets its own scale (`relevance_scale`); the server "
    "refits on its own once a fit covers less than 90 % of its collection's chunks (or the "
    "collection shrank below 90 % of them)."
)
@click.option("-c", "--collection", help="Only this collection.")
@user_errors
def refit(collection: str | None) -> None:
    import cari.collection
    from cari.search import fit

    async def work(rt: Runtime) -> dict[str, dict[str, Any] | None]:
        if collection is None:
            async with rt.pool.connection() as conn:
                names = [c.name for c in await cari.collection.list_all(conn)]
        else:
            names = [collection]
        return {name: await fit.fit(rt.pool, name, rt.embedders, rt.settings) for name in names}

    for name, found in run(work, settings(), batch=True).items():
        if found is None:
            click.echo(f"{name}: too few embedded chunks to fit; the configured scale applies")
        else:
            probes = found["probes"]
            click.echo(
                f"{name}: cosine floor {found['cosine_floor']}, ceiling "
                f"{found['cosine_ceiling']} (own questions' median cosine "
                f"{probes['on_topic']['median']}, other subjects' {probes['off_topic']['median']})"
            )
