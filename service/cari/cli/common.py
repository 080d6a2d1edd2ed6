"""What every `cari` command shares: one-line user errors, the settings, the migrated-database
step and a runtime to work in.

Commands import the heavy modules (the runtime, the search engine, the model) when they run,
so that `cari --help` and the commands that need none of them start at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from functools import wraps
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

import click
import psycopg
from psycopg_pool import PoolTimeout

from cari.cli.priority import lowered, own_session, warn_when_starved
from cari.concurrency import beside
from cari.db import database as db
from cari.db import migrations
from cari.errors import CariError
from cari.limits import bounds, choices
from cari.settings import Settings, load_settings

if TYPE_CHECKING:
    from cari.runtime import Runtime

P = ParamSpec("P")
R = TypeVar("R")

log = logging.getLogger(__name__)


def user_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Turn Cari's user-facing errors into a one-line message and exit status 1."""

    @wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except CariError as exc:
            raise click.ClickException(exc.message) from None
        except (psycopg.OperationalError, PoolTimeout) as exc:
            # As the HTTP API says it; the driver's own text (hosts, the statement) goes to the
            # log.
            log.warning("database error: %s", exc)
            raise click.ClickException(db.failure(exc, settings()).message) from None

    return wrapper


def settings(**overrides: object) -> Settings:
    """The settings, with the options the user gave (None: not given) over the environment."""
    return load_settings(**{k: v for k, v in overrides.items() if v is not None})


def ready_database(settings: Settings) -> str:
    """The DSN of a database that answers (the embedded server started if it is the one)."""
    dsn = db.database_url(settings)
    db.check_reachable(dsn)
    return dsn


def migrated_database(settings: Settings) -> str:
    """A reachable database at the latest schema, checked against the embedder's width."""
    dsn = ready_database(settings)
    migrations.upgrade(dsn, settings)
    db.check_embedding_dimension(dsn, settings)
    migrations.ensure_vector_indexes(dsn, settings)
    return dsn


def run(
    work: Callable[[Runtime], Awaitable[R]], config: Settings | None = None, *, batch: bool = False
) -> R:
    """`work` in a runtime on the migrated database, closed when it returns. A `batch` job
    (ingest, re-embed, refit) runs in a session of its own, at `CARI_BATCH_NICENESS` once the
    database is up (so an embedded server this command starts keeps the normal priority): a
    serving process on the same machine keeps the CPU for questions."""
    from cari.runtime import check, open_runtime

    config = config or settings()
    niceness = config.batch_niceness if batch else 0
    if niceness > 0:
        own_session()  # first: nothing started yet that a fork would copy
    check(config)  # before the embedded server may be started for nothing
    dsn = migrated_database(config)
    watched = niceness > 0 and config.embedder == "local"  # the model's work is this process's

    async def main() -> R:
        async with open_runtime(config, dsn=dsn) as rt:
            if not watched:
                return await work(rt)
            # The watcher never cancels: `work`'s result is always there.
            return cast(R, await beside(work(rt), lambda _: warn_when_starved(niceness)))

    with lowered(niceness):
        return asyncio.run(main())


def choice(literal: Any) -> click.Choice[str]:
    """An option's choices from the request type's `Literal`."""
    return click.Choice(choices(literal))


def int_range(annotated: Any) -> click.IntRange:
    """An integer option's range from the request type's bounds."""
    least, greatest = bounds(annotated)
    return click.IntRange(least, greatest)


def float_range(annotated: Any) -> click.FloatRange:
    """A number option's range from the request type's bounds."""
    least, greatest = bounds(annotated)
    return click.FloatRange(least, greatest)


def print_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table()
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*row)
    Console().print(table)
