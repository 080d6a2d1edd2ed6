"""The database a benchmark runs in: a fresh one on DATABASE_URL, or on a throwaway embedded
server whose folder is removed at exit."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from cari import db, embedded, migrations
from cari.settings import Settings

_embedded: list[str] = []  # the throwaway server's DSN, once started: one per process


async def fresh_pool(name: str, settings: Settings) -> AsyncConnectionPool:
    """An open pool on a new, migrated database called `name` (replacing one an earlier run
    left)."""
    if settings.database_url:
        server = settings.database_url
    elif _embedded:
        server = _embedded[0]
    else:
        folder = Path(tempfile.mkdtemp(prefix="cari-bench-"))
        # Registered before the server's own exit handler, so it runs after the server stops.
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        server = embedded.start(folder)
        _embedded.append(server)
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = psycopg.conninfo.make_conninfo(server, dbname=name)
    migrations.upgrade(dsn, settings)
    pool = db.make_pool(dsn, settings)
    await pool.open(wait=True)
    return pool
