"""Schema migrations (Alembic), run programmatically by `cari migrate` and `cari serve`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from alembic.util import CommandError

from cari.errors import InvalidInput
from cari.queries import query
from cari.settings import Settings

ALEMBIC_DIR = Path(__file__).resolve().parents[2] / "alembic"


def _config(dsn: str, settings: Settings) -> Config:
    config = Config()
    config.set_main_option("script_location", str(ALEMBIC_DIR))
    # env.py connects with this DSN and reads index parameters from these settings.
    config.attributes["dsn"] = dsn
    config.attributes["settings"] = settings
    return config


def upgrade(dsn: str, settings: Settings, revision: str = "head") -> None:
    try:
        command.upgrade(_config(dsn, settings), revision)
    except CommandError as exc:
        raise InvalidInput("revision", str(exc)) from None


def downgrade(dsn: str, settings: Settings, revision: str) -> None:
    try:
        command.downgrade(_config(dsn, settings), revision)
    except CommandError as exc:
        raise InvalidInput("revision", str(exc)) from None


def head() -> str:
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
