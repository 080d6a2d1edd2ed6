"""`cari ingest` and `cari reembed`: documents in, vectors filled in."""

from __future__ import annotations

import signal
import time
from functools import partial
from typing import TYPE_CHECKING

import anyio
import click

from cari.cli.common import run, settings, user_errors
from cari.concurrency import beside

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cari.ingest import files, store
    from cari.ingest.bulk import Tally
    from cari.runtime import Runtime
    from cari.settings import Settings


LOCAL_BATCH_SIZE = 32
SERVICE_BATCH_SIZE = 256


@click.command(help="Ingest files, folders, globs, or JSON Lines from stdin ('-').")
@click.argument("paths", nargs=-1, required=True)
@click.option("-c", "--collection", required=True, help="Collection to ingest into.")
@click.option(
    "--create",
    is_flag=True,
    help="Create the collection if it does not exist (with --language).",
)
@click.option("--language", default="simple", show_default=True, help="Language for --create.")
@click.option(
    "--embedder",
    metavar="NAME",
    help="Embedder for --create: `local` or a profile of CARI_EMBEDDERS. [default: CARI_EMBEDDER]",
)
@click.option(
    "--batch-size",
    type=click.IntRange(1, 10_000),
    help="Documents per transaction, at most: a batch also ends once it holds as much text as "
    "the load stored in ~10 s so far (at most ~1 MB). "
    "[default: 32 with the local embedder, 256 with an embedding service]",
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
    help="Defer the vector index: if no other collection has vectors of this one's width, drop "
    "it for the load and rebuild it at the end without blocking other writes (much faster for "
    "large loads; this collection's vector searches meanwhile scan exactly). Otherwise the "
    "index is kept.",
)
@user_errors
def ingest(
    paths: tuple[str, ...],
    collection: str,
    create: bool,
    language: str,
    embedder: str | None,
    batch_size: int | None,
    workers: int,
    bulk: bool,
) -> None:
    # A bulk load is a batch job: its statements last as long as its batches, and none holds a
    # lock a request waits on (cari.ingest.bulk), so the requests' statement timeout could only
    # kill a legal load.
    # Imported here: the file readers (PDF, images) take ~0.3 s that other commands need not.
    from cari.ingest import files

    config = settings(statement_timeout_ms=0 if bulk else None)
    sources = files.expand(paths)
    if batch_size is None:
        # The local model embeds a few chunks a second: small batches keep the progress moving
        # and lose little when a load is killed. With a service, the database's cost per
        # transaction (BM25 statistics deltas, round trips) makes the writer 1.5x faster with
        # 256 one-chunk documents a batch than with 32 (docs/benchmarks.md, "Ingestion with a
        # fast embedder").
        batch_size = LOCAL_BATCH_SIZE if config.embedder == "local" else SERVICE_BATCH_SIZE

    from cari.ingest.bulk import Tally

    tally = Tally()
    stopped_by: list[int] = []  # the signal that stopped the load, if one did

    async def work(rt: Runtime) -> None:
        from cari.search import fit

        started = time.monotonic()
        load = _ingest(
            rt,
            collection,
            sources,
            create_language=language if create else None,
            create_embedder=embedder,
            batch_size=batch_size,
            workers=workers,
            defer_index=bulk,
            tally=tally,
        )
        await beside(load, partial(_stop_on_signal, stopped_by=stopped_by))
        _summarize(tally, time.monotonic() - started, stopped=bool(stopped_by))
        if stopped_by:
            return
        # A first load, or one its fit no longer covers: its relevance scale is fitted anew.
        if await fit.refit_stale(rt.pool, rt.embedders, rt.settings, collection):
            click.echo(f"fitted the relevance scale of '{collection}' to its content", err=True)

    run(work, config, batch=True)
    if stopped_by:  # as a shell reports a command a signal ended: 130 for Ctrl-C, 143 a kill
        raise SystemExit(128 + stopped_by[0])
    if tally.failures:
        raise SystemExit(1)


async def _stop_on_signal(scope: anyio.CancelScope, stopped_by: list[int]) -> None:
    """At the first Ctrl-C or SIGTERM, cancel `scope`: the batches being embedded are dropped
    and those being written finish (each is stored whole or not at all). A second signal
    finds Python's own handling again and quits at once."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            stopped_by.append(signum)
            click.echo("\nstopping: keeping what is stored (again to quit at once)…", err=True)
            scope.cancel()
            return


@click.command(help="Embed chunks stored without vectors (e.g. while the embedder was down).")
@click.option("-c", "--collection", help="Only this collection.")
@click.option(
    "--all",
    "everything",
    is_flag=True,
    help="Re-embed every chunk of --collection (after changing the model).",
)
@click.option(
    "--embedder",
    metavar="NAME",
    help="Move --collection to this embedder ('local' or a CARI_EMBEDDERS name): its chunks "
    "and catalog items are embedded anew while searches use the old vectors, which the new "
    "ones replace at once when complete. Run it again to resume.",
)
@user_errors
def reembed(collection: str | None, everything: bool, embedder: str | None) -> None:
    if (everything or embedder is not None) and collection is None:
        raise click.UsageError(f"{'--all' if everything else '--embedder'} needs --collection")
    if everything and embedder is not None:
        raise click.UsageError("--embedder re-embeds everything already: drop --all")
    if embedder is not None:
        assert collection is not None

        async def move(rt: Runtime) -> int:
            from cari.reembed import switch_embedder

            click.echo(f"embedding {collection} with {embedder}…", err=True)
            return await switch_embedder(
                rt.pool,
                rt.embedders,
                rt.settings,
                collection,
                embedder,
                batch_size=rt.settings.embedding_batch_size,
            )

        count = run(move, batch=True)
        click.echo(f"embedded {count} chunks and items; {collection} now uses {embedder}")
        return

    async def work(rt: Runtime) -> int:
        from cari.ingest import pipeline, store

        ref = None
        if collection is not None:
            async with rt.pool.connection() as conn:
                ref = await store.collection_ref(conn, collection)
        click.echo("embedding…", err=True)
        return await pipeline.reembed(
            rt.pool,
            rt.embedders,
            collection=ref,
            everything=everything,
            batch_size=rt.settings.embedding_batch_size,
        )

    click.echo(f"embedded {run(work, batch=True)} chunks")


async def _ingest(
    rt: Runtime,
    collection: str,
    sources: Sequence[files.InputFile],
    *,
    create_language: str | None,
    create_embedder: str | None,
    batch_size: int,
    workers: int,
    defer_index: bool,
    tally: Tally,
) -> None:
    """Load `sources`, counting into `tally`, with a progress bar of the sources' bytes done
    (stored, unchanged or failed; the text read stands for a file's bytes)."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from cari.ingest.bulk import ingest_sources

    total = None if any(s.path is None for s in sources) else sum(s.size or 0 for s in sources)
    async with rt.pool.connection() as conn:
        await _ensure_collection(conn, collection, create_language, create_embedder, rt.settings)
    started = time.monotonic()
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[documents]} docs · {task.fields[chunks]} chunks stored"),
        TextColumn("· {task.fields[embedded]} embedded, {task.fields[rate]:.1f}/s"),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=False,
    ) as progress:
        task = progress.add_task(
            f"ingest → {collection}", total=total, documents=0, chunks=0, embedded=0, rate=0.0
        )

        def show(tally: Tally) -> None:
            progress.update(
                task,
                completed=tally.bytes_done,
                documents=tally.documents,
                chunks=tally.chunks,
                embedded=tally.embedded,
                rate=tally.embedded / max(time.monotonic() - started, 1e-6),
            )

        await ingest_sources(
            rt.ingestor,
            collection,
            sources,
            batch_size=batch_size,
            workers=workers,
            defer_index=defer_index,
            on_progress=show,
            tally=tally,
        )
        if total is not None:  # every source is done: text read stood for less than its bytes
            tally.bytes_done = total
        show(tally)


async def _ensure_collection(
    conn: store.Conn,
    name: str,
    create_language: str | None,
    create_embedder: str | None,
    config: Settings,
) -> None:
    import cari.collection
    from cari.errors import NotFound
    from cari.ingest import store
    from cari.schema.collections import CollectionCreate

    try:
        await store.collection_ref(conn, name)
    except NotFound:
        if create_language is None:
            raise NotFound(
                f"collection '{name}' does not exist: add --create (and --language) "
                "or create it with POST /v1/collections"
            ) from None
        spec = CollectionCreate(name=name, language=create_language, embedder=create_embedder)
        await cari.collection.create(conn, spec, config)


def _summarize(tally: Tally, seconds: float, *, stopped: bool) -> None:
    rate = tally.chunks / seconds if seconds > 0 else 0.0
    say = partial(click.echo, err=True)
    say(
        f"{'stopped: ' if stopped else ''}{tally.documents} documents ({tally.created} new, "
        f"{tally.updated} updated, {tally.unchanged} unchanged), {tally.chunks} chunks "
        f"{'stored ' if stopped else ''}in {seconds:.1f} s ({rate:.1f} chunks/s)"
    )
    if stopped:
        say(
            "the rest was not stored: run the same command again to go on (what is stored "
            "is skipped as unchanged)"
        )
    for warning in tally.warnings:
        say(f"warning: {warning}")
    if tally.not_embedded:
        say(
            f"{tally.not_embedded} chunks are stored without vectors: run `cari reembed` "
            "(a running server does it by itself)"
        )
    if tally.failures:
        say(f"{len(tally.failures)} failed:")
        for failure in tally.failures:
            say(f"  {failure.where}: {failure.reason}")
