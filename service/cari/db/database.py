"""Where the database is, whether it answers, and whether its vectors fit the embedder."""

from __future__ import annotations

import psycopg
from psycopg_pool import PoolTimeout

from cari.db import embedded
from cari.db.queries import query
from cari.errors import (
    CariError,
    ConfigError,
    DatabaseBusy,
    DatabaseUnavailable,
    InvalidInput,
    StatementTimeout,
)
from cari.settings import Settings


def database_url(settings: Settings, *, keep_running: bool = False) -> str:
    """The configured server's DSN, starting the embedded server when none is configured."""
    if settings.database_url is not None:
        return settings.database_url
    return embedded.start(
        settings.data_dir,
        keep_running=keep_running,
        shared_buffers_mb=settings.embedded_shared_buffers_mb,
        keyword_extension=settings.keyword_engine != "sql",
    )


# How long a client should wait before retrying after the database failed: a restart or a
# failover takes seconds; a full pool frees up in about a request's time.
DATABASE_RETRY_AFTER_S = 5
POOL_RETRY_AFTER_S = 1


def refused(exc: psycopg.DataError, field: str) -> InvalidInput:
    """A value PostgreSQL refuses (a NUL in text, say): the caller's input, named `field`, in
    PostgreSQL's own words on one line."""
    return InvalidInput(field, "invalid value: " + " ".join(str(exc).split()))


def failure(exc: Exception, settings: Settings) -> CariError:
    """What a database failure (`psycopg.OperationalError`, `PoolTimeout`) means, truthfully and
    without the driver's text, which can name hosts and users."""
    if isinstance(exc, PoolTimeout):
        return DatabaseBusy(
            f"database busy: no connection came free within {settings.pool_timeout_s:g} s",
            retry_after=POOL_RETRY_AFTER_S,
        )
    if isinstance(exc, psycopg.errors.QueryCanceled):
        # Retrying the same request would most likely run as long again: no Retry-After.
        return StatementTimeout(
            "the database cancelled a statement that ran longer than "
            f"{settings.statement_timeout_ms} ms (CARI_STATEMENT_TIMEOUT_MS)"
        )
    return DatabaseUnavailable("database unavailable", retry_after=DATABASE_RETRY_AFTER_S)


def check_reachable(dsn: str) -> None:
    """Fail with one clear sentence when the server cannot be reached."""
    try:
        with psycopg.connect(dsn, connect_timeout=5):
            pass
    except psycopg.OperationalError as exc:
        reason = " ".join(line.strip() for line in str(exc).splitlines()) or type(exc).__name__
        raise DatabaseUnavailable(f"cannot connect to PostgreSQL: {reason}") from None


def check_embedding_dimension(dsn: str, settings: Settings) -> None:
    """Stop early when a collection's embedder does not fit the vectors it stores, or is not
    configured at all."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(query("embedding_dimension")).fetchall()
    for name, embedder, stored in rows:
        wanted = settings.dimension_of(embedder)  # ConfigError for an unknown embedder
        if stored != wanted:
            label = embedder or settings.embedder
            raise ConfigError(
                f"the database stores {stored}-dimensional embeddings for collection "
                f"'{name}' but its embedder ({label}) makes {wanted}: run "
                "`cari migrate --resize-embeddings` to empty the vectors of another width, "
                "then `cari reembed`; or switch back to the embedder the data was made with"
            )
