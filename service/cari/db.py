"""Where the database is, whether it answers, and whether its vectors fit the embedder."""

from __future__ import annotations

import psycopg

from cari import embedded
from cari.errors import ConfigError, DatabaseUnavailable
from cari.queries import query
from cari.settings import Settings


def database_url(settings: Settings, *, keep_running: bool = False) -> str:
    """The configured server's DSN, starting the embedded server when none is configured."""
    if settings.database_url is not None:
        return settings.database_url
    return embedded.start(
        settings.data_dir,
        keep_running=keep_running,
        shared_buffers_mb=settings.embedded_shared_buffers_mb,
    )


def check_reachable(dsn: str) -> None:
    """Fail with one clear sentence when the server cannot be reached."""
    try:
        with psycopg.connect(dsn, connect_timeout=5):
            pass
    except psycopg.OperationalError as exc:
        reason = " ".join(line.strip() for line in str(exc).splitlines()) or type(exc).__name__
        raise DatabaseUnavailable(f"cannot connect to PostgreSQL: {reason}") from None


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
