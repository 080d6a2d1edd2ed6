"""The composition root: everything a Cari process works with, built and closed in one place.

    async with open_runtime(settings) as rt:
        response = await rt.searcher.search("faq", request)

The HTTP lifespan, every CLI command and every benchmark open a runtime; nothing else builds
the connection pool, the embedder, the chat and rerank clients, or the searcher, ingestor and
answerer on them. A new dependency (a replica pool, metrics) is therefore wired here once.

They are closed in the reverse order of building: the replicas' checks, the answerer's clients,
then the embedder, then the pools, so nothing is closed under a part that still uses it.

With read replicas (`CARI_READ_DATABASE_URLS`) each gets a pool of its own; searches, answers and
the API's reads choose among them and the primary (`cari.db.replicas`), everything else uses
`pool`, the primary's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

import anyio
import psycopg
from anyio import to_thread
from pgvector.psycopg import register_vector_async
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from cari.answer.llm import ChatClient
from cari.answer.service import Answerer
from cari.db import database as db
from cari.db.keyword_engine import KeywordEngine
from cari.db.replicas import Reads
from cari.db.statements import RecordingCursor
from cari.db.supervisor import supervise
from cari.embed import Embedder, Embedders, LocalEmbedder, OpenAIEmbedder, check_settings
from cari.errors import EmbedderUnavailable
from cari.ingest.pipeline import Ingestor, backfill_embeddings
from cari.observability import metrics
from cari.search import fit
from cari.search.collection_rows import CollectionRows
from cari.search.engine import Searcher
from cari.search.rerank import Reranker
from cari.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Runtime:
    """What a running Cari works with; valid inside `open_runtime` only."""

    settings: Settings
    pool: AsyncConnectionPool  # the primary's: writes, migrations, upkeep
    reads: Reads  # where searches, answers and reads run: a replica, or the primary
    embedder: Embedder  # the default one
    embedders: Embedders  # every one a collection may name
    searcher: Searcher
    ingestor: Ingestor
    answerer: Answerer
    keyword_engine: KeywordEngine  # which serves keyword search: `await .current()`, `.known`


def check(settings: Settings) -> None:
    """Raise ConfigError for settings no runtime can be built from, before anything starts."""
    check_settings(settings)


@asynccontextmanager
async def open_runtime(
    settings: Settings,
    *,
    dsn: str | None = None,
    wait: bool = True,
    wrap_embedder: Callable[[Embedder], Embedder] | None = None,
    serving: bool = False,
) -> AsyncIterator[Runtime]:
    """Build the runtime on `dsn`, or on the configured database (started if embedded).

    `wait=False` opens the pool without waiting for a connection, so a server can start (and
    report the database on /readyz) while PostgreSQL is down. `wrap_embedder` puts a layer
    around each embedder, e.g. a benchmark's on-disk cache. `serving`: a serving process's
    upkeep runs in the background while the runtime is open (`_upkeep`).
    """
    check(settings)
    location = dsn if dsn is not None else await to_thread.run_sync(db.database_url, settings)
    async with AsyncExitStack() as stack:
        pool = make_pool(location, settings)
        stack.push_async_callback(pool.close)
        replicas = [
            (url, make_pool(url, settings, name=f"cari-replica{n}"))
            for n, url in enumerate(settings.read_database_urls, 1)
        ]
        for _, replica in replicas:
            stack.push_async_callback(replica.close)
        embedder = make_embedder(settings)
        if wrap_embedder is not None:
            embedder = wrap_embedder(embedder)
        stack.push_async_callback(embedder.aclose)
        embedders = Embedders(settings, embedder, wrap_embedder)
        stack.push_async_callback(embedders.aclose)
        chat = _chat_client(settings)
        if chat is not None:
            stack.push_async_callback(chat.aclose)
        reranker = _reranker(settings)
        if reranker is not None:
            stack.push_async_callback(reranker.aclose)
        await pool.open(wait=wait)
        for _, replica in replicas:
            # A replica that is down is out of reads until a check finds it up.
            await replica.open(wait=False)
        reads = Reads(
            pool,
            replicas,
            max_lag_s=settings.max_replica_lag_s,
            wait_s=settings.replica_wait_s,
        )
        stack.push_async_callback(reads.close)
        if reads.replicas:
            await reads.check()  # the replicas that are up serve from the first request
            await stack.enter_async_context(_in_background(reads.watch()))
        # Which keyword engine serves (Cari's extension, or the SQL statement): asked once.
        engine = KeywordEngine(pool, settings)
        searcher = Searcher(
            reads,
            embedders,
            settings,
            collections=CollectionRows(pool, location),
            keyword_engine=engine,
            reranker=reranker,
        )
        if wait:  # asked now, so /metrics has it from the start; else at the first /readyz
            with contextlib.suppress(psycopg.OperationalError, PoolTimeout):
                await engine.current()
        stack.enter_context(metrics.watch(pool, searcher.vectors, reads, engine))
        runtime = Runtime(
            settings=settings,
            pool=pool,
            reads=reads,
            embedder=embedder,
            embedders=embedders,
            searcher=searcher,
            ingestor=Ingestor(pool, embedders, settings),
            answerer=Answerer(searcher, chat=chat),
            keyword_engine=engine,
        )
        if serving:  # entered last: stopped first, before anything it uses is closed
            await _load(embedder)
            await stack.enter_async_context(_upkeep(runtime))
        yield runtime


@asynccontextmanager
async def _upkeep(rt: Runtime) -> AsyncIterator[None]:
    """What a serving process does in the background while it serves: hear changes to
    collections (so searches keep their rows), embed what was stored without a vector and keep
    each collection's relevance scale fitted (unless CARI_REEMBED_INTERVAL_S is 0), and keep
    the embedded server up (when Cari runs it). Cancelled when the block ends."""
    settings = rt.settings
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(rt.searcher.collections.listen)
        if settings.reembed_interval_s > 0:
            tasks.start_soon(backfill_embeddings, rt.pool, rt.embedders, settings)
            tasks.start_soon(fit.keep_fitted, rt.pool, rt.embedders, settings)
        if settings.database_url is None:  # the embedded server: ours to keep up
            tasks.start_soon(supervise, settings.data_dir, rt.pool)
        yield
        tasks.cancel_scope.cancel()


async def _load(embedder: Embedder) -> None:
    """Load (the first time in a data folder, convert) the local model before serving, so no
    question waits for it. One that cannot be loaded is logged; requests that need it are then
    answered with its reason (EmbedderUnavailable), and everything else is served."""
    if isinstance(embedder, LocalEmbedder):
        try:
            await to_thread.run_sync(embedder.load)
        except EmbedderUnavailable as exc:
            log.error("%s", exc.message)


def make_embedder(settings: Settings) -> Embedder:
    """The embedder `CARI_EMBEDDER` names, configured from `settings` (ConfigError if it cannot
    be)."""
    if settings.embedder == "openai":
        return OpenAIEmbedder(settings)
    return LocalEmbedder.from_settings(settings)


async def _configure(conn: psycopg.AsyncConnection[object]) -> None:
    # Before migrations the type is missing: /readyz reports that, nothing else runs.
    with contextlib.suppress(psycopg.ProgrammingError):
        await register_vector_async(conn)


@asynccontextmanager
async def _in_background(work: Coroutine[object, object, None]) -> AsyncIterator[None]:
    """Run `work` while the block runs; cancelled at its end."""
    task = asyncio.create_task(work)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def make_pool(dsn: str, settings: Settings, *, name: str = "cari") -> AsyncConnectionPool:
    """A closed pool on `dsn` with the service's connection settings; `open_runtime` opens it."""
    return AsyncConnectionPool(
        dsn,
        min_size=settings.pool_min_size,
        max_size=settings.pool_max_size,
        timeout=settings.pool_timeout_s,
        open=False,
        configure=_configure,
        # Autocommit: a lone read is one round trip, not BEGIN + query + COMMIT; writes that
        # belong together say so with `conn.transaction()`. The HNSW settings are the session's
        # so a vector search is one statement: iterative scans keep returning neighbours until
        # enough rows pass the WHERE clause (other collections, metadata filters).
        kwargs={
            "autocommit": True,
            # What a search ran, for `cari search --sql` (cari.db.statements).
            "cursor_factory": RecordingCursor,
            "options": f"-c statement_timeout={settings.statement_timeout_ms}"
            f" -c hnsw.ef_search={settings.hnsw_ef_search}"
            " -c hnsw.iterative_scan=strict_order",
        },
        name=name,
    )


def _chat_client(settings: Settings) -> ChatClient | None:
    if not (settings.llm_base_url and settings.llm_model):
        return None
    return ChatClient(
        base_url=settings.llm_base_url,
        model=settings.llm_model,
        api_key=settings.llm_api_key,
        temperature=settings.llm_temperature,
        max_tokens=settings.llm_max_tokens,
        timeout_s=settings.llm_timeout_s,
    )


def _reranker(settings: Settings) -> Reranker | None:
    if not (settings.rerank_base_url and settings.rerank_model):
        return None
    return Reranker(
        base_url=settings.rerank_base_url,
        model=settings.rerank_model,
        api_key=settings.rerank_api_key,
        timeout_s=settings.rerank_timeout_s,
    )
