"""A collection's search threshold: searches rank, and cut only where a user chose to.

- `collections.search_threshold`: the least relevance (0-1) a search of the collection returns
  when the request sets none; NULL (the default): no cut, the top k ranked, each with its
  relevance and band. `collections.threshold` stays what answers apply to their sources.

Revision ID: 0015
Revises: 0014
"""

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE collections
            ADD COLUMN search_threshold double precision
                CHECK (search_threshold BETWEEN 0 AND 1)
        """
    )


def downgrade() -> None:
    op.execute("ALTER TABLE collections DROP COLUMN search_threshold")
