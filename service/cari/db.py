"""Where the database is, and the async connection pool the service borrows from."""

from __future__ import annotations

import contextlib

import psycopg
from pgvector.psycopg import register_vector_async
from psycopg_pool import AsyncConnectionPool

from cari import embedded
from cari.errors import ConfigError, DatabaseUnavailable
from cari.queries import query
from cari.settings import Settings


def database_url(settings: Settings, *, keep_running: bool = False) -> str:
    """The configured server's DSN, starting the embedded server when none is configured."""
    if settings.database_url is not None:
        return settings.database_url
    return embedded.start(settings.data_dir, keep_running=keep_running)


def check_reachable(dsn: str) -> None:
    """Fail with one clear sentence when the server cannot be reached."""
    try:
        with psycopg.connect(dsn, connect_timeout=5):
            pass
    except psycopg.OperationalError as exc:
        reason = " ".join(line.strip() for line in str(exc).splitlines()) or type(exc).__name__
        raise DatabaseUnavailable(f"cannot connect to PostgreSQL: {reason}") from None


async def _configure(conn: psycopg.AsyncConnection[object]) -> None:
    # Before migrations the type is missing: /readyz reports that, nothing else runs.
    with contextlib.suppress(psycopg.ProgrammingError):
        await register_vector_async(conn)


def make_pool(dsn: str, settings: Settings) -> AsyncConnectionPool:
    """A closed pool; open it in the application's lifespan."""
    return AsyncConnectionPool(
        dsn,
        min_size=settings.pool_min_size,
        max_size=settings.pool_max_size,
        timeout=settings.pool_timeout_s,
        open=False,
        configure=_configure,
        # Autocommit: a lone read is one round trip, not BEGIN + query + COMMIT; writes that
        # belong together say so with `conn.transaction()`.
        kwargs={
            "autocommit": True,
            "options": f"-c statement_timeout={settings.statement_timeout_ms}"
            f" -c hnsw.ef_search={settings.hnsw_ef_search}",
        },
        name="cari",
    )


def check_embedding_dimension(dsn: str, settings: Settings) -> None:
    """Stop early when the configured embedder does not fit the database's vectors."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute(query("embedding_dimension")).fetchone()
    stored = int(row[0]) if row else None
    wanted = settings.embedding_dimension
    if stored != wanted:
        raise ConfigError(
            f"the database stores {stored}-dimensional embeddings but the configured embedder "
            f"({settings.embedder}) makes {wanted}: run `cari migrate --resize-embeddings` "
            "to change the columns (the old vectors are dropped), then `cari reembed`; "
            "or switch back to the embedder the data was made with"
        )
