"""A collection's own HNSW `ef_search`: what `cari tune ef-search --apply` stores.

- `collections.ef_search`: the `hnsw.ef_search` a vector search of the collection uses when the
  request sets none; NULL (the default): the server's CARI_HNSW_EF_SEARCH.

Revision ID: 0027
Revises: 0026
"""

from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE collections ADD COLUMN ef_search integer CHECK (ef_search BETWEEN 1 AND 1000)"
    )


def downgrade() -> None:
    op.execute("ALTER TABLE collections DROP COLUMN ef_search")
