"""`cari serve`, `cari mcp`, `cari migrate` and `cari db`: the servers, the schema and the
database."""

from __future__ import annotations

import logging
import os
import signal
import sys
from pathlib import Path

import click

from cari.cli.common import migrated_database, ready_database, run, settings, user_errors
from cari.cli.priority import ask_short_slices
from cari.db import backup, embedded, migrations, standby
from cari.db import database as db
from cari.errors import CariError
from cari.observability import logs, tracing

log = logging.getLogger(__name__)


@click.command(help="Migrate the database, then serve the HTTP API.")
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

    from cari.api.app import create_app
    from cari.api.protocol import http_protocol
    from cari.runtime import check

    config = settings(host=host, port=port, allow_unauthenticated=allow_unauthenticated)
    config.check_bind(config.host)
    check(config)  # a configuration error is one line, before anything starts or logs
    # Before logging is configured: its request ids are then put on records that already carry
    # their trace ids.
    tracing.configure()
    logs.configure(config)
    dsn = migrated_database(config)
    # After the embedded server started (its processes keep the kernel's slices); the model's
    # threads and the event loop's pool, started later, inherit it.
    ask_short_slices(config.serve_time_slice_us)
    app = create_app(config, dsn)
    where = "external server" if config.database_url else f"embedded, data in {config.data_dir}"
    access = (
        "API keys required (CARI_API_KEYS)"
        if config.api_keys
        else "API keys required once one is stored (cari keys), open until then"
    )
    log.info("database %s; %s", where, access)
    base = f"http://{_url_host(config.host)}:{config.port}"
    log.info("serving %s: the search console at %s/console, the API at %s/docs", base, base, base)
    # Uvicorn re-raises SIGTERM after its graceful shutdown; exiting normally instead lets the
    # embedded server be stopped when this was its last user.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    # Uvicorn's lines (startup, access log) go through the logging configured above.
    uvicorn.run(
        app, host=config.host, port=config.port, log_config=None, http=http_protocol(config)
    )


def _url_host(host: str) -> str:
    """`host` as a browser on this machine reaches it: every interface by localhost."""
    if host in ("0.0.0.0", "::", ""):
        return "localhost"
    return f"[{host}]" if ":" in host else host


@click.command(
    help="Serve Cari to AI agents over MCP on standard input and output: the tools search, "
    "answer, list_collections and get_document. An MCP client starts it (docs/clients.md); "
    "`cari serve` offers the same tools over HTTP at /mcp."
)
@user_errors
def mcp() -> None:
    from cari.mcp.server import serve_stdio

    run(serve_stdio)


@click.command(help="Upgrade the database schema (or downgrade with --downgrade).")
@click.option("--revision", default="head", show_default=True, help="Revision to upgrade to.")
@click.option("--downgrade", "down_to", metavar="REVISION", help="Downgrade to REVISION ('base').")
@click.option(
    "--resize-embeddings",
    is_flag=True,
    help="Fit each collection to its embedder's width (indexed as halfvec from "
    "CARI_HALFVEC_DIMENSIONS up): the vectors of a collection whose embedder now makes another "
    "width are dropped, then `cari reembed` recomputes them.",
)
@user_errors
def migrate(revision: str, down_to: str | None, resize_embeddings: bool) -> None:
    config = settings()
    dsn = ready_database(config)
    if down_to is not None:
        migrations.downgrade(dsn, config, down_to)
        click.echo(f"downgraded to {down_to}")
        return
    migrations.upgrade(dsn, config, revision)
    click.echo(f"upgraded to {revision}")
    if resize_embeddings:
        resized = migrations.resize_embeddings(dsn, config)
        click.echo(
            f"{resized} collection(s) resized to their embedder's width; "
            "run `cari reembed` to compute their vectors"
        )


@click.group(name="db", help="Look inside the database.")
def db_group() -> None:
    pass


@db_group.command(help="Print a DSN that psql can use (starts the embedded server if needed).")
@user_errors
def url() -> None:
    config = settings()
    if config.database_url is not None:
        click.echo(config.database_url)
        return
    # The embedded server stays up after this command so the DSN remains usable;
    # `cari db stop` stops it.
    click.echo(db.database_url(config, keep_running=True))


@db_group.command(help="Stop the embedded server (refused while Cari processes use it).")
@click.option("--force", is_flag=True, help="Stop it even while Cari processes use it.")
@user_errors
def stop(force: bool) -> None:
    config = settings()
    if config.database_url is not None:
        raise CariError("DATABASE_URL is set: Cari does not manage that server")
    stopped = embedded.stop(config.data_dir, force=force)
    click.echo("stopped" if stopped else "not running", err=not stopped)


@db_group.command(
    help="Start a streaming standby of the embedded server on this machine (copied with "
    "pg_basebackup the first time, in CARI_DATA_DIR/replicas/NAME) and print its URL: put it "
    "in CARI_READ_DATABASE_URLS to serve reads from it. It runs until `--stop`; the embedded "
    "server keeps running until `cari db stop`."
)
@click.option(
    "--name", default="replica1", show_default=True, help="The standby's name (its folder)."
)
@click.option("--stop", "stopping", is_flag=True, help="Stop the standby instead.")
@user_errors
def replica(name: str, stopping: bool) -> None:
    config = settings()
    if config.database_url is not None:
        raise CariError(
            "DATABASE_URL is set: make standbys of that server with its own tools "
            "(pg_basebackup -R; docs/scaling.md)"
        )
    if not name.replace("-", "").replace("_", "").isalnum():
        raise CariError(f"--name {name!r}: letters, digits, '-' and '_' only")
    pgdata = config.data_dir / "replicas" / name
    if stopping:
        stopped = standby.stop(pgdata)
        click.echo("stopped" if stopped else "not running", err=not stopped)
        return
    if not (pgdata / "PG_VERSION").exists():
        # The standby follows the embedded server: it must outlive this command.
        db.database_url(config, keep_running=True)
        primary = migrated_database(config)
        owner = embedded.pgdata_path(config.data_dir).owner() if os.geteuid() == 0 else None
        standby.create(primary, pgdata, user=owner)
    click.echo(standby.start(pgdata))


@db_group.command(help="Back the database up to FILE (pg_dump's custom format).")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@user_errors
def dump(file: Path) -> None:
    config = settings()
    backup.dump(ready_database(config), file)
    click.echo(f"backed up to {file}")


@db_group.command(
    help="Replace the database with the backup in FILE, then migrate it to this version "
    "(refused while Cari processes use the embedded server)."
)
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Restore even while Cari processes use it.")
@user_errors
def restore(file: Path, force: bool) -> None:
    config = settings()
    dsn = ready_database(config)
    if config.database_url is None and not force and (live := embedded.users(config.data_dir)):
        raise CariError(
            f"the embedded PostgreSQL is in use by Cari processes (pid "
            f"{', '.join(map(str, live))}): stop them first, or add --force"
        )
    backup.restore(dsn, file)
    migrated_database(config)  # a backup from an earlier version is brought up to this one
    click.echo(f"restored from {file}")
