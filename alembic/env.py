"""Alembic environment: Cari passes the DSN and its settings in `config.attributes`."""

from __future__ import annotations

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
        context.run_migrations()
