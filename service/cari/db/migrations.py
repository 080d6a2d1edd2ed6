"""Schema migrations (Alembic), run programmatically by `cari migrate` and `cari serve`."""

from __future__ import annotations

import importlib.util
from types import ModuleType
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

from cari.db import keyword_engine
from cari.db.queries import query
from cari.db.resources import folder
from cari.db.vector_space import TABLES, Space, configured_spaces
from cari.errors import InvalidInput
from cari.settings import LOCAL_EMBEDDER, Settings

if TYPE_CHECKING:
    from alembic.config import Config

ALEMBIC_DIR = folder("alembic")


def earlier_revision(prefix: str) -> ModuleType:
    """The module of the revision whose file name starts with `prefix`, loaded on its own: a
    later migration reads its constants, or recreates a function as it was when downgraded."""
    path = next((ALEMBIC_DIR / "versions").glob(f"{prefix}_*.py"))
    spec = importlib.util.spec_from_file_location(f"cari_revision_{prefix}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def edited(text: str, *edits: tuple[str, str]) -> str:
    """An earlier revision's statement (`text`) with each (old, new) edit made: a migration
    that changes a few lines of a function states only those. Each old text must be there
    exactly once, or the edit would silently miss or hit twice."""
    for old, new in edits:
        if (found := text.count(old)) != 1:
            raise RuntimeError(f"{old.strip()[:60]!r} found {found} times, not once")
        text = text.replace(old, new)
    return text


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
    """Migrate to `revision`, then create or update Cari's keyword extension where the server
    has it (`cari.db.keyword_engine.install`). A database at the head already is left to
    itself without Alembic: importing it (and SQLAlchemy) cost every `cari` command ~1 s."""
    if revision not in ("head", head()) or _revision(dsn) != head():
        from alembic import command
        from alembic.util import CommandError

        try:
            command.upgrade(_config(dsn, settings), revision)
        except CommandError as exc:
            raise InvalidInput("revision", str(exc)) from None
    keyword_engine.install(dsn, settings)


def downgrade(dsn: str, settings: Settings, revision: str) -> None:
    from alembic import command
    from alembic.util import CommandError

    try:
        command.downgrade(_config(dsn, settings), revision)
    except CommandError as exc:
        raise InvalidInput("revision", str(exc)) from None


def head() -> str:
    """The newest revision: each file's revision is its number, and revises the number before
    (tests/test_migrations.py holds this to Alembic's own head)."""
    return max(path.name[:4] for path in (ALEMBIC_DIR / "versions").glob("[0-9]" * 4 + "_*.py"))


def _revision(dsn: str) -> str | None:
    """The database's revision, or None when it was never migrated."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(query("schema_migrated")).fetchone()
        if not row or not row[0]:
            return None
        version = conn.execute(query("schema_revision")).fetchone()
        return str(version[0]) if version else None


async def current(conn: psycopg.AsyncConnection[Any]) -> str | None:
    """The database's revision, or None when it was never migrated."""
    cursor = await conn.execute(query("schema_migrated"))
    row = await cursor.fetchone()
    if not row or not row[0]:
        return None
    cursor = await conn.execute(query("schema_revision"))
    version = await cursor.fetchone()
    return str(version[0]) if version else None


def resize_embeddings(dsn: str, settings: Settings) -> int:
    """Fit every collection to its embedder's width: the vectors of a collection whose embedder
    now makes another width are emptied (they wait for `cari reembed`), the indexes of the
    configured widths are built and those of widths no embedder makes are dropped. Returns how
    many collections changed width."""
    resized = 0
    with psycopg.connect(dsn) as conn:
        for name in (None, *embedder_names(settings)):
            row = conn.execute(
                query("embeddings_resize"),
                {"embedder": name, "dimension": settings.dimension_of(name)},
            ).fetchone()
            resized += int(row[0]) if row else 0
        wanted = {s.index_name(t) for s in configured_spaces(settings) for t in TABLES}
        for (index,) in conn.execute(query("vector_indexes_present")).fetchall():
            if index not in wanted:
                drop = sql.SQL(query("vector_index_drop")).format(index=sql.Identifier(index))
                conn.execute(drop)
        conn.execute(vector_indexes_statement(settings))
    return resized


def embedder_names(settings: Settings) -> list[str]:
    """The names a collection's `embedder` may take (None, the default, besides)."""
    return [LOCAL_EMBEDDER, *settings.embedders]


def vector_index_statement(space: Space, table: str, settings: Settings) -> sql.Composed:
    """Build `space`'s HNSW index on `table` if it is missing, with the configured parameters."""
    return space.statement(
        "vector_indexes_create",
        **_index_fields(space, table, settings),
        memory=sql.Literal(f"{settings.index_build_memory_mb}MB"),
    )


def _index_fields(space: Space, table: str, settings: Settings) -> dict[str, sql.Composable]:
    """The fields both HNSW index statements are composed with: name, table, parameters."""
    return {
        "index": sql.Identifier(space.index_name(table)),
        "table": sql.Identifier(table),
        "ops": sql.SQL(f"{space.kind}_cosine_ops"),
        "m": sql.Literal(settings.hnsw_m),
        "ef_construction": sql.Literal(settings.hnsw_ef_construction),
    }


def vector_index_drop_statement(space: Space, table: str = "chunks") -> sql.Composed:
    """Drop `space`'s HNSW index on `table`, in a transaction (benchmarks time loads without)."""
    return sql.SQL(query("vector_index_drop")).format(index=sql.Identifier(space.index_name(table)))


def vector_index_drop_concurrently(space: Space, table: str = "chunks") -> sql.Composed:
    """Drop `space`'s HNSW index on `table` without blocking writes (outside a transaction)."""
    return sql.SQL(query("vector_index_drop_concurrently")).format(
        index=sql.Identifier(space.index_name(table))
    )


def maintenance_options(settings: Settings) -> str:
    """The connection options for dropping and building indexes: no statement timeout (a build
    takes as long as the table is large; only a timeout the operator sets for requests could
    cut it short) and the build's memory."""
    return f"-c statement_timeout=0 -c maintenance_work_mem={settings.index_build_memory_mb}MB"


def vector_index_repair(
    space: Space, table: str, settings: Settings, valid: bool | None
) -> list[sql.Composed]:
    """The statements that make `space`'s index on `table` usable, given whether it is
    (vector_index_valid: None when missing, False when an interrupted concurrent build left it
    INVALID): none, a concurrent build, or a drop of the invalid one before it."""
    if valid:
        return []
    build = space.statement("vector_index_build", **_index_fields(space, table, settings))
    return [build] if valid is None else [vector_index_drop_concurrently(space, table), build]


def vector_indexes_statement(settings: Settings) -> sql.Composed:
    """Build the HNSW indexes of every configured width that are missing."""
    return sql.Composed(
        [
            vector_index_statement(space, table, settings)
            for space in configured_spaces(settings)
            for table in TABLES
        ]
    )


def ensure_vector_indexes(dsn: str, settings: Settings) -> None:
    """Build the HNSW index of a width a new embedder brings, or one a killed bulk load left
    dropped or INVALID, concurrently: writes go on meanwhile. Skipped while a bulk load runs
    (that load rebuilds its index); a check reads the catalog, so it is a no-op when all are
    valid."""
    with psycopg.connect(dsn, autocommit=True, options=maintenance_options(settings)) as conn:

        def repairs() -> list[sql.Composed]:
            steps = []
            for space in configured_spaces(settings):
                for table in TABLES:
                    row = conn.execute(
                        query("vector_index_valid"), {"index": space.index_name(table)}
                    ).fetchone()
                    steps += vector_index_repair(space, table, settings, row[0] if row else None)
            return steps

        if not repairs():
            return
        row = conn.execute(query("vector_index_try_lock")).fetchone()
        if not (row and row[0]):
            return
        try:
            # Again under the lock: a bulk load may have rebuilt the index meanwhile.
            for statement in repairs():
                conn.execute(statement)
        finally:
            conn.execute(query("vector_index_unlock"))
