"""Which keyword engine serves a database: Cari's C extension `cari_bm25` when it is created
there and the server has its files, else the SQL statement (`sql/search_keyword.sql`, the same
scores, slower).

`install` runs after the migrations (`cari.db.migrations.upgrade`): it creates the extension when
the server has it (the embedded server is given Cari's own build, `cari.db.extension`; another
server has it when a DBA installed it, docs/operations.md) and updates it when the server has
another version. Where it cannot, Cari says so once and the SQL statement serves.
`CARI_KEYWORD_ENGINE=sql` forces the SQL statement: nothing is built or created; where the
extension was created, its packed postings go back to the `postings` table and it is dropped
(the statement reads only that table).

`KeywordEngine` is a runtime's: it asks the database once and keeps the answer, which /readyz,
/metrics (`cari_keyword_engine`) and `explain` report, and the damaged blocks its searches met
(`damage`, which /readyz reports until they read well).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

import psycopg
from psycopg_pool import AsyncConnectionPool

from cari.db import extension
from cari.db.keyword_damage import Damage
from cari.db.queries import query
from cari.settings import Settings

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Engine:
    """A keyword engine: `sql`, or `cari_bm25` at the version created in the database."""

    name: Literal["sql", "cari_bm25"]
    version: str | None = None

    def __str__(self) -> str:
        return self.name if self.version is None else f"{self.name} {self.version}"


SQL = Engine("sql")


def install(dsn: str, settings: Settings) -> Engine:
    """Create (or update) the extension in the database at `dsn` when the server has it; the
    engine that serves it then. Said once when the extension cannot serve."""
    if settings.keyword_engine == "sql":
        _unfold(dsn)
        return SQL
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(query("keyword_extension_available")).fetchone()
        if row is None:
            extension.fall_back(
                f"the database server does not have Cari's keyword extension {extension.NAME}: "
                "a DBA installs it as docs/operations.md says (Cari's keyword extension)"
            )
            return SQL
        default, installed = row
        try:
            if installed is None:
                conn.execute(query("keyword_extension_create"))
            elif installed != default:
                conn.execute(query("keyword_extension_update"))
        except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateObject):
            pass  # another process created it at the same moment
        except psycopg.errors.InsufficientPrivilege:
            statement = (
                "CREATE EXTENSION cari_bm25"
                if installed is None
                else "ALTER EXTENSION cari_bm25 UPDATE"
            )
            extension.fall_back(
                f"Cari's database user may not run `{statement}`: a superuser runs it in "
                "Cari's database"
            )
            return SQL
        except psycopg.Error as exc:
            reason = " ".join(str(exc).split())
            extension.fall_back(f"`CREATE EXTENSION cari_bm25` (or UPDATE) failed: {reason}")
            return SQL
        return _engine(conn.execute(query("keyword_engine")).fetchone())


def _unfold(dsn: str) -> None:
    """With the SQL statement chosen, a database where the extension was created gets its packed
    postings back as rows, and the extension goes: the statement reads rows only."""
    with psycopg.connect(dsn) as conn, conn.transaction():
        if conn.execute(query("keyword_extension_installed")).fetchone() is None:
            return
        conn.execute(query("bm25_unfold_lock"))
        moved = conn.execute(query("bm25_unfold")).rowcount
        conn.execute(query("keyword_extension_drop"))
    _log.warning(
        "CARI_KEYWORD_ENGINE=sql: %s packed postings moved back to the postings table and the "
        "extension %s dropped from the database (restart every Cari process on it)",
        moved,
        extension.NAME,
    )


async def detect(conn: psycopg.AsyncConnection[Any], settings: Settings) -> Engine:
    """The engine serving the database `conn` is connected to."""
    if settings.keyword_engine == "sql":
        return SQL  # `install` dropped the extension
    cursor = await conn.execute(query("keyword_engine"))
    return _engine(await cursor.fetchone())


def _engine(row: tuple[Any, ...] | None) -> Engine:
    return SQL if row is None else Engine("cari_bm25", str(row[0]))


class KeywordEngine:
    """The keyword engine of a runtime's database, asked once and kept."""

    def __init__(self, pool: AsyncConnectionPool, settings: Settings) -> None:
        self._pool = pool
        self._settings = settings
        self._known: Engine | None = None
        self.damage = Damage()

    @property
    def known(self) -> Engine | None:
        """The engine, once asked (`current`); None before."""
        return self._known

    async def current(self, conn: psycopg.AsyncConnection[Any] | None = None) -> Engine:
        """The engine, asked on `conn` (else a pooled connection) the first time."""
        if self._known is None:
            if conn is not None:
                self._known = await detect(conn, self._settings)
            else:
                async with self._pool.connection() as pooled:
                    self._known = await detect(pooled, self._settings)
        return self._known

    def labels(self) -> tuple[str, str] | None:
        """(engine, version) for /metrics, once known."""
        if self._known is None:
            return None
        return self._known.name, self._known.version or ""
