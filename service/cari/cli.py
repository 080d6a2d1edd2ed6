"""The `cari` command. It validates options, calls the core and reports; errors are one line."""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from functools import wraps
from typing import ParamSpec, TypeVar

import click

from cari import db, embedded, migrations
from cari.errors import CariError
from cari.settings import Settings, load_settings

P = ParamSpec("P")
R = TypeVar("R")


def user_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Turn Cari's user-facing errors into a one-line message and exit status 1."""

    @wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except CariError as exc:
            raise click.ClickException(exc.message) from None

    return wrapper


def _settings(**overrides: object) -> Settings:
    return load_settings(**{k: v for k, v in overrides.items() if v is not None})


def _ready_database(settings: Settings) -> str:
    dsn = db.database_url(settings)
    db.check_reachable(dsn)
    return dsn


@click.group(help="Cari: hybrid search and RAG where all retrieval lives in PostgreSQL.")
@click.version_option(package_name="cari")
def main() -> None:
    pass


@main.command(help="Migrate the database, then serve the HTTP API.")
@click.option("--host", help="Address to listen on (default: CARI_HOST or 127.0.0.1).")
@click.option("--port", type=int, help="Port to listen on (default: CARI_PORT or 8000).")
@click.option(
    "--allow-unauthenticated",
    is_flag=True,
    default=None,
    help="Serve without API keys on a non-loopback address.",
)
@user_errors
def serve(host: str | None, port: int | None, allow_unauthenticated: bool | None) -> None:
    import uvicorn

    from cari.api import create_app

    settings = _settings(host=host, port=port, allow_unauthenticated=allow_unauthenticated)
    settings.check_bind(settings.host)
    dsn = _ready_database(settings)
    migrations.upgrade(dsn, settings)
    where = "external server" if settings.database_url else f"embedded, data in {settings.data_dir}"
    access = "API keys required" if settings.api_keys else "no API keys (open API)"
    click.echo(f"cari: database {where}; {access}", err=True)
    # Uvicorn re-raises SIGTERM after its graceful shutdown; exiting normally instead lets the
    # embedded server be stopped when this was its last user.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    uvicorn.run(create_app(settings, dsn), host=settings.host, port=settings.port)


@main.command(help="Upgrade the database schema (or downgrade with --downgrade).")
@click.option("--revision", default="head", show_default=True, help="Revision to upgrade to.")
@click.option("--downgrade", "down_to", metavar="REVISION", help="Downgrade to REVISION ('base').")
@user_errors
def migrate(revision: str, down_to: str | None) -> None:
    settings = _settings()
    dsn = _ready_database(settings)
    if down_to is not None:
        migrations.downgrade(dsn, settings, down_to)
        click.echo(f"downgraded to {down_to}")
    else:
        migrations.upgrade(dsn, settings, revision)
        click.echo(f"upgraded to {revision}")


@main.group(name="db", help="Look inside the database.")
def db_group() -> None:
    pass


@db_group.command(help="Print a DSN that psql can use (starts the embedded server if needed).")
@user_errors
def url() -> None:
    settings = _settings()
    if settings.database_url is not None:
        click.echo(settings.database_url)
        return
    # The embedded server stays up after this command so the DSN remains usable;
    # `cari db stop` stops it.
    click.echo(db.database_url(settings, keep_running=True))


@db_group.command(help="Stop the embedded server.")
@user_errors
def stop() -> None:
    settings = _settings()
    if settings.database_url is not None:
        raise CariError("DATABASE_URL is set: Cari does not manage that server")
    stopped = embedded.stop(settings.data_dir)
    click.echo("stopped" if stopped else "not running", err=not stopped)


if __name__ == "__main__":
    sys.exit(main())
