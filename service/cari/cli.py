"""The `cari` command. It validates options, calls the core and reports; errors are one line."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable
from functools import wraps
from typing import ParamSpec, TypeVar

import click

from cari import db, embedded, migrations
from cari.cli_catalog import catalog, rates
from cari.errors import CariError
from cari.ingest import files
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


def _migrated_database(settings: Settings) -> str:
    """A reachable database at the latest schema, checked against the embedder's width."""
    dsn = _ready_database(settings)
    migrations.upgrade(dsn, settings)
    db.check_embedding_dimension(dsn, settings)
    migrations.ensure_vector_indexes(dsn, settings)
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
    dsn = _migrated_database(settings)
    app = create_app(settings, dsn)
    where = "external server" if settings.database_url else f"embedded, data in {settings.data_dir}"
    access = "API keys required" if settings.api_keys else "no API keys (open API)"
    click.echo(f"cari: database {where}; {access}", err=True)
    # Uvicorn re-raises SIGTERM after its graceful shutdown; exiting normally instead lets the
    # embedded server be stopped when this was its last user.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    uvicorn.run(app, host=settings.host, port=settings.port)


@main.command(help="Upgrade the database schema (or downgrade with --downgrade).")
@click.option("--revision", default="head", show_default=True, help="Revision to upgrade to.")
@click.option("--downgrade", "down_to", metavar="REVISION", help="Downgrade to REVISION ('base').")
@click.option(
    "--resize-embeddings",
    is_flag=True,
    help="Widen or narrow the vector columns to the configured embedder's dimension; "
    "existing vectors are dropped, then `cari reembed` recomputes them.",
)
@user_errors
def migrate(revision: str, down_to: str | None, resize_embeddings: bool) -> None:
    settings = _settings()
    dsn = _ready_database(settings)
    if down_to is not None:
        migrations.downgrade(dsn, settings, down_to)
        click.echo(f"downgraded to {down_to}")
        return
    migrations.upgrade(dsn, settings, revision)
    click.echo(f"upgraded to {revision}")
    if resize_embeddings:
        migrations.resize_embeddings(dsn, settings)
        click.echo(
            f"embedding columns now hold {settings.embedding_dimension} dimensions; "
            "run `cari reembed` to compute the vectors"
        )


@main.command(help="Ingest files, folders, globs, or JSON Lines from stdin ('-').")
@click.argument("paths", nargs=-1, required=True)
@click.option("-c", "--collection", required=True, help="Collection to ingest into.")
@click.option(
    "--create",
    is_flag=True,
    help="Create the collection if it does not exist (with --language).",
)
@click.option("--language", default="simple", show_default=True, help="Language for --create.")
@click.option(
    "--batch-size",
    type=click.IntRange(1, 10_000),
    default=32,
    show_default=True,
    help="Documents per transaction.",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 32),
    default=2,
    show_default=True,
    help="Batches in flight at once.",
)
@click.option(
    "--bulk",
    is_flag=True,
    help="Drop the vector index during the load and rebuild it once at the end: much faster "
    "for large loads; vector searches meanwhile scan exactly (slower).",
)
@user_errors
def ingest(
    paths: tuple[str, ...],
    collection: str,
    create: bool,
    language: str,
    batch_size: int,
    workers: int,
    bulk: bool,
) -> None:
    from cari.cli_core import run_ingest

    settings = _settings()
    sources = files.expand(paths)
    dsn = _migrated_database(settings)
    tally = asyncio.run(
        run_ingest(
            settings,
            dsn,
            collection,
            sources,
            create_language=language if create else None,
            batch_size=batch_size,
            workers=workers,
            defer_index=bulk,
        )
    )
    if tally.failures:
        raise SystemExit(1)


@main.command(help="Search a collection.")
@click.argument("query")
@click.option("-c", "--collection", required=True, help="Collection to search.")
@click.option("--mode", type=click.Choice(["hybrid", "vector", "keyword"]), help="Search mode.")
@click.option(
    "--fusion", type=click.Choice(["rrf", "minmax", "zscore"]), help="How hybrid fuses the lists."
)
@click.option("--top-k", type=click.IntRange(1, 50), help="Results to return.")
@click.option(
    "--threshold",
    type=click.FloatRange(0, 1),
    help="Least relevance (0-1) a result needs; 0 keeps everything.",
)
@click.option(
    "--no-decompose", is_flag=True, help="Search the question whole, even if it compares things."
)
@click.option("--explain", is_flag=True, help="Show the plan and per-stage timings.")
@click.option("--json", "as_json", is_flag=True, help="Print the response as JSON.")
@user_errors
def search(
    query: str,
    collection: str,
    mode: str | None,
    fusion: str | None,
    top_k: int | None,
    threshold: float | None,
    no_decompose: bool,
    explain: bool,
    as_json: bool,
) -> None:
    import msgspec

    from cari.cli_core import print_results, run_search
    from cari.search.engine import SearchRequest

    settings = _settings()
    request = SearchRequest(
        query=query,
        mode=mode,  # type: ignore[arg-type]
        fusion=fusion,  # type: ignore[arg-type]
        top_k=top_k,
        threshold=threshold,
        decompose=not no_decompose,
        explain=explain,
    )
    response = asyncio.run(run_search(settings, _migrated_database(settings), collection, request))
    if as_json:
        click.echo(msgspec.json.encode(response).decode())
    else:
        print_results(response)


@main.command(help="Answer a question from a collection, citing its sources [1], [2], ...")
@click.argument("question")
@click.option("-c", "--collection", required=True, help="Collection to answer from.")
@click.option("--top-k", type=click.IntRange(1, 50), help="Sources to answer from.")
@click.option(
    "--threshold", type=click.FloatRange(0, 1), help="Least relevance (0-1) a source needs."
)
@click.option("--no-rerank", is_flag=True, help="Skip the configured reranker.")
@click.option("--json", "as_json", is_flag=True, help="Print the events as JSON Lines.")
@user_errors
def ask(
    question: str,
    collection: str,
    top_k: int | None,
    threshold: float | None,
    no_rerank: bool,
    as_json: bool,
) -> None:
    from cari.answer.service import AnswerRequest
    from cari.cli_core import run_answer

    settings = _settings()
    request = AnswerRequest(query=question, top_k=top_k, threshold=threshold, rerank=not no_rerank)
    asyncio.run(run_answer(settings, _migrated_database(settings), collection, request, as_json))


@main.command(help="Embed chunks stored without vectors (e.g. while the embedder was down).")
@click.option("-c", "--collection", help="Only this collection.")
@click.option(
    "--all",
    "everything",
    is_flag=True,
    help="Re-embed every chunk of --collection (after changing the model).",
)
@user_errors
def reembed(collection: str | None, everything: bool) -> None:
    from cari.cli_core import run_reembed

    if everything and collection is None:
        raise click.UsageError("--all needs --collection")
    settings = _settings()
    dsn = _migrated_database(settings)
    count = asyncio.run(run_reembed(settings, dsn, collection, everything))
    click.echo(f"embedded {count} chunks")


@main.group(help="Check or rebuild the keyword (BM25) index: postings and statistics.")
def bm25() -> None:
    pass


@bm25.command(help="Recount every collection's BM25 index from its chunks and compare.")
@click.option("-c", "--collection", help="Only this collection.")
@user_errors
def check(collection: str | None) -> None:
    from cari.cli_core import run_keyword_index_check

    settings = _settings()
    differences = asyncio.run(run_keyword_index_check(_migrated_database(settings), collection))
    for name, kinds in differences.items():
        found = ", ".join(f"{count} {kind}" for kind, count in kinds.items() if count)
        click.echo(f"{name}: {'differs: ' + found if found else 'exact'}")
    if any(any(kinds.values()) for kinds in differences.values()):
        raise SystemExit(1)


@bm25.command(help="Recompute every collection's BM25 index from its chunks.")
@click.option("-c", "--collection", help="Only this collection.")
@user_errors
def repair(collection: str | None) -> None:
    from cari.cli_core import run_keyword_index_repair

    settings = _settings()
    for name in asyncio.run(run_keyword_index_repair(_migrated_database(settings), collection)):
        click.echo(f"{name}: rebuilt")


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


main.add_command(catalog)
main.add_command(rates)

if __name__ == "__main__":
    sys.exit(main())
