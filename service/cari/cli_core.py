"""The CLI commands that need the database or the embedder: ingest, reembed, search, ask, bm25."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import click
import psycopg
from psycopg_pool import AsyncConnectionPool
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from cari import collection as collections
from cari import db
from cari.answer.service import Answerer, AnswerRequest
from cari.embed import Embedder, make_embedder
from cari.errors import NotFound
from cari.ingest import store
from cari.ingest.bulk import Tally, ingest_sources
from cari.ingest.files import Source
from cari.ingest.pipeline import Ingestor, reembed
from cari.search.engine import Searcher, SearchRequest, SearchResponse
from cari.settings import Settings


@asynccontextmanager
async def _resources(
    settings: Settings, dsn: str
) -> AsyncIterator[tuple[AsyncConnectionPool, Embedder]]:
    pool = db.make_pool(dsn, settings)
    await pool.open(wait=True)
    embedder = make_embedder(settings)
    try:
        yield pool, embedder
    finally:
        await embedder.aclose()
        await pool.close()


async def run_ingest(
    settings: Settings,
    dsn: str,
    collection: str,
    sources: Sequence[Source],
    *,
    create_language: str | None,
    batch_size: int,
    workers: int,
    defer_index: bool,
) -> Tally:
    console = Console(stderr=True)
    total = None if any(s.path is None for s in sources) else sum(s.size or 0 for s in sources)
    async with _resources(settings, dsn) as (pool, embedder):
        async with pool.connection() as conn:
            await _ensure_collection(conn, collection, create_language)
        started = time.monotonic()
        with Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[documents]} docs · {task.fields[chunks]} chunks"),
            TextColumn("· {task.fields[rate]:.1f} chunks/s"),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        ) as progress:
            task = progress.add_task(
                f"ingest → {collection}", total=total, documents=0, chunks=0, rate=0.0
            )

            def show(tally: Tally) -> None:
                elapsed = max(time.monotonic() - started, 1e-6)
                progress.update(
                    task,
                    completed=tally.bytes_read,
                    documents=tally.documents,
                    chunks=tally.chunks,
                    rate=tally.chunks / elapsed,
                )

            tally = await ingest_sources(
                Ingestor(pool, embedder, settings),
                collection,
                sources,
                batch_size=batch_size,
                workers=workers,
                defer_index=defer_index,
                on_progress=show,
            )
            progress.update(task, completed=total or tally.bytes_read)
            show(tally)
    _summarize(tally, time.monotonic() - started)
    return tally


async def _ensure_collection(conn: store.Conn, name: str, create_language: str | None) -> None:
    try:
        await store.collection_ref(conn, name)
    except NotFound:
        if create_language is None:
            raise NotFound(
                f"collection '{name}' does not exist: add --create (and --language) "
                "or create it with POST /v1/collections"
            ) from None
        await collections.create(
            conn, collections.CollectionCreate(name=name, language=create_language)
        )


def _summarize(tally: Tally, seconds: float) -> None:
    rate = tally.chunks / seconds if seconds > 0 else 0.0
    say = partial(click.echo, err=True)
    say(
        f"{tally.documents} documents ({tally.created} new, {tally.updated} updated, "
        f"{tally.unchanged} unchanged), {tally.chunks} chunks in {seconds:.1f} s "
        f"({rate:.1f} chunks/s)"
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


async def run_reembed(
    settings: Settings, dsn: str, collection: str | None, everything: bool
) -> int:
    async with _resources(settings, dsn) as (pool, embedder):
        ref = None
        if collection is not None:
            async with pool.connection() as conn:
                ref = await store.collection_ref(conn, collection)
        click.echo("embedding…", err=True)
        return await reembed(
            pool,
            embedder,
            collection=ref,
            everything=everything,
            batch_size=settings.embedding_batch_size,
        )


async def run_search(
    settings: Settings, dsn: str, collection: str, request: SearchRequest
) -> SearchResponse:
    async with _resources(settings, dsn) as (pool, embedder):
        return await Searcher(pool, embedder, settings).search(collection, request)


async def run_answer(
    settings: Settings, dsn: str, collection: str, request: AnswerRequest, as_json: bool
) -> None:
    """Print the answer as it is written, then its numbered sources (or the events as JSON
    Lines, one per event)."""
    async with _resources(settings, dsn) as (pool, embedder):
        answerer = Answerer(pool, Searcher(pool, embedder, settings), settings)
        try:
            prepared = await answerer.prepare(collection, request)
            async for event in answerer.events(prepared):
                if as_json:
                    click.echo(json.dumps({"event": event.name, "data": event.data}))
                elif event.name == "llm_chunk":
                    click.echo(event.data["text"], nl=False)
                elif event.name == "citations":
                    click.echo()
                    for number, cited in event.data["citations"].items():
                        where = cited["document_id"] or cited["id"]
                        click.echo(f"[{number}] {cited['title'] or where} ({where})")
                elif event.name == "metadata":
                    for warning in event.data["warnings"]:
                        click.echo(f"warning: {warning}", err=True)
                elif event.name == "error":
                    raise click.ClickException(event.data["message"])
        finally:
            await answerer.aclose()


def print_results(response: SearchResponse) -> None:
    console = Console()
    if len(response.sub_queries) > 1:
        click.echo("sub-queries: " + " | ".join(response.sub_queries))
    if response.intents != ["knowledge"]:
        click.echo("intents: " + ", ".join(response.intents))
    table = Table(show_lines=False)
    for column in ("#", "relevance", "score", "source", "title", "text"):
        table.add_column(column, overflow="fold")
    for rank, result in enumerate(response.results, 1):
        snippet = " ".join(result.content.split())
        table.add_row(
            str(rank),
            f"{result.relevance:.2f}",
            f"{result.score:.4f}",
            result.document_id or result.id,
            result.title,
            snippet[:160] + ("…" if len(snippet) > 160 else ""),
        )
    console.print(table)
    if not response.results:
        click.echo("no result passed the relevance threshold", err=True)
    for warning in response.warnings:
        click.echo(f"warning: {warning}", err=True)
    if response.explain is not None:
        console.print_json(data=response.explain)


async def _collection_names(conn: psycopg.AsyncConnection[Any], only: str | None) -> list[str]:
    if only is not None:
        return [(await collections.get(conn, only)).name]
    return [c.name for c in await collections.list_all(conn)]


async def run_keyword_index_check(dsn: str, only: str | None) -> dict[str, dict[str, int]]:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        return {
            name: await collections.keyword_index_differences(conn, name)
            for name in await _collection_names(conn, only)
        }


async def run_keyword_index_repair(dsn: str, only: str | None) -> list[str]:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        names = await _collection_names(conn, only)
        for name in names:
            await collections.rebuild_keyword_index(conn, name)
        return names
