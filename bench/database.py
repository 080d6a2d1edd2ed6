"""The database a benchmark runs in: a fresh one on DATABASE_URL, or on a throwaway embedded
server whose folder is removed at exit; and a runtime on it."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import psycopg
from psycopg import sql

from cari.db import embedded
from cari.db import migrations
from cari.embed import Embedder
from cari.runtime import Runtime, open_runtime
from cari.settings import Settings

_embedded: list[str] = []  # the throwaway server's DSN, once started: one per process


def fresh_database(name: str, settings: Settings) -> str:
    """The DSN of a new, migrated database called `name` (replacing one an earlier run left)."""
    if settings.database_url:
        server = settings.database_url
    elif _embedded:
        server = _embedded[0]
    else:
        folder = Path(tempfile.mkdtemp(prefix="cari-bench-"))
        # Registered before the server's own exit handler, so it runs after the server stops.
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        server = embedded.start(folder, shared_buffers_mb=settings.embedded_shared_buffers_mb)
        _embedded.append(server)
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = psycopg.conninfo.make_conninfo(server, dbname=name)
    migrations.upgrade(dsn, settings)
    return dsn


@asynccontextmanager
async def fresh_runtime(
    name: str, settings: Settings, *, wrap_embedder: Callable[[Embedder], Embedder] | None = None
) -> AsyncIterator[Runtime]:
    """A runtime on a new, migrated database called `name`."""
    dsn = fresh_database(name, settings)
    async with open_runtime(settings, dsn=dsn, wrap_embedder=wrap_embedder) as rt:
        yield rt
