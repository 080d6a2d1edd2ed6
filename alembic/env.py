"""Alembic environment: Cari passes the DSN and its settings in `config.attributes`."""

from __future__ import annotations

import logging

import psycopg
from alembic import context
from sqlalchemy import create_engine
from sqlalchemy.pool import NullPool

config = context.config
dsn: str = config.attributes["dsn"]

engine = create_engine(
    "postgresql+psycopg://", creator=lambda: psycopg.connect(dsn), poolclass=NullPool
)
with engine.connect() as connection:
    context.configure(connection=connection, transactional_ddl=True)
    with context.begin_transaction():
        # Two Cari processes starting on a new database must not both create the schema.
        connection.exec_driver_sql("SELECT pg_advisory_xact_lock(417002)")
        migration = context.get_context()
        before = migration.get_current_revision()
        context.run_migrations()
        after = migration.get_current_revision()
# Alembic's own INFO lines say the same things at every start ("Context impl ..."): Cari's
# log quiets them (cari.observability.logs) and says this instead, only when the schema moved.
if after != before:
    logging.getLogger("cari.db.migrations").info(
        "database schema migrated from %s to %s", before or "an empty database", after
    )
