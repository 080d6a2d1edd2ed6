"""Schema migrations (Alembic), run programmatically by `cari migrate` and `cari serve`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

from cari.errors import InvalidInput
from cari.queries import query
from cari.resources import folder
from cari.settings import Settings

if TYPE_CHECKING:
    from alembic.config import Config

ALEMBIC_DIR = folder("alembic")

# Alembic is imported where it runs: importing it loads SQLAlchemy (~0.4 s), which the modules
# that only read the revision (/readyz, and the client through the API's structs) never need.


def _config(dsn: str, settings: Settings) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(ALEMBIC_DIR))
    # env.py connects with this DSN and reads index parameters from these settings.
    config.attributes["dsn"] = dsn
    config.attributes["settings"] = settings
    return config


def upgrade(dsn: str, settings: Settings, revision: str = "head") -> None:
    from alembic import command
    from alembic.util import CommandError

    try:
        command.upgrade(_config(dsn, settings), revision)
    except CommandError as exc:
        raise InvalidInput("revision", str(exc)) from None


def downgrade(dsn: str, settings: Settings, revision: str) -> None:
    from alembic import command
    from alembic.util import CommandError

    try:
        command.downgrade(_config(dsn, settings), revision)
    except CommandError as exc:
        raise InvalidInput("revision", str(exc)) from None


def head() -> str:
    from alembic.script import ScriptDirectory

    script = ScriptDirectory(str(ALEMBIC_DIR))
    revision = script.get_current_head()
    assert revision is not None, "the alembic folder has no revisions"
    return revision


async def current(conn: psycopg.AsyncConnection[Any]) -> str | None:
    """The database's revision, or None when it was never migrated."""
    cursor = await conn.execute(query("schema_migrated"))
    row = await cursor.fetchone()
    if not row or not row[0]:
        return None
    cursor = await conn.execute(query("schema_revision"))
    version = await cursor.fetchone()
    return str(version[0]) if version else None


def resize_embeddings(dsn: str, settings: Settings) -> None:
    """Make the embedding columns as wide as the configured embedder's vectors (emptying them)."""
    resize = sql.SQL(query("embeddings_resize")).format(
        dimension=sql.Literal(settings.embedding_dimension)
    )
    with psycopg.connect(dsn) as conn:
        conn.execute(resize)
        conn.execute(vector_indexes_statement(settings))


def vector_indexes_statement(settings: Settings) -> sql.Composed:
    """Build the HNSW indexes that are missing, with the configured parameters."""
    return sql.SQL(query("vector_indexes_create")).format(
        m=sql.Literal(settings.hnsw_m),
        ef_construction=sql.Literal(settings.hnsw_ef_construction),
        memory=sql.Literal(f"{settings.index_build_memory_mb}MB"),
    )


def ensure_vector_indexes(dsn: str, settings: Settings) -> None:
    """Rebuild an HNSW index a killed bulk load left dropped (a no-op when present, and
    skipped while a bulk load runs: that load rebuilds it)."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute(query("vector_index_try_lock")).fetchone()
        if row and row[0]:
            conn.execute(vector_indexes_statement(settings))
