"""`cari synonyms`: a collection's synonym rules, shown, replaced from a file, or cleared.

A rules file holds one rule a line (`CRV, CR-V`; `angsuran => cicilan`); blank lines and lines
starting with '#' are skipped. Rules apply from the next query on, with no re-indexing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

import click

from cari.cli.common import run, user_errors
from cari.schema.collections import Synonyms

if TYPE_CHECKING:
    from cari.runtime import Runtime

COLLECTION = click.option("-c", "--collection", required=True, help="The collection.")


@click.group(help="Synonym rules per collection: equivalences (a, b) and one-way (a => b).")
def synonyms() -> None:
    pass


@synonyms.command(help="Print the collection's rules, one a line.")
@COLLECTION
@user_errors
def show(collection: str) -> None:
    from cari import synonyms as rules

    async def work(rt: Runtime) -> Synonyms:
        async with rt.pool.connection() as conn:
            return await rules.get(conn, collection)

    for rule in run(work).rules:
        click.echo(rule)


@synonyms.command(
    name="set",
    help="Replace the collection's rules with those of FILE ('-' reads stdin): one rule a "
    "line, '#' comments. A bad rule is reported and nothing changes (exit status 1).",
)
@click.argument("file", type=click.File("r", encoding="utf-8"))
@COLLECTION
@user_errors
def set_rules(file: TextIO, collection: str) -> None:
    import msgspec

    from cari import synonyms as rules
    from cari.errors import InvalidInput

    lines = [line.strip() for line in file.read().splitlines()]
    found = [line for line in lines if line and not line.startswith("#")]
    try:  # the limits the HTTP API applies when it decodes a body
        wanted = msgspec.convert({"rules": found}, Synonyms)
    except msgspec.ValidationError as exc:
        raise InvalidInput.from_msgspec(str(exc), "rules") from None

    async def work(rt: Runtime) -> Synonyms:
        async with rt.pool.connection() as conn:
            return await rules.replace(conn, collection, wanted)

    saved = run(work)
    click.echo(f"{collection}: {len(saved.rules)} rules")


@synonyms.command(help="Remove all of the collection's rules.")
@COLLECTION
@user_errors
def clear(collection: str) -> None:
    from cari import synonyms as rules

    async def work(rt: Runtime) -> Synonyms:
        async with rt.pool.connection() as conn:
            return await rules.replace(conn, collection, Synonyms(rules=[]))

    run(work)
    click.echo(f"{collection}: 0 rules")
