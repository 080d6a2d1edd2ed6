"""The relevance scale fitted to each collection, and a scale set for it that wins over the fit.

- `collections.relevance_fit`: the scale `cari.search.fit` fitted to the collection's content
  (cosine floor and ceiling, the embedder and chunk count it was fitted at, when, and its
  probes' figures); NULL until fitted or when the collection has too few chunks.
- `collections.relevance_cosine_floor` / `_ceiling`: the scale set for the collection; set,
  both together, they win over the fit and the server's settings.

Revision ID: 0013
Revises: 0012
"""

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE collections
            ADD COLUMN relevance_fit jsonb,
            ADD COLUMN relevance_cosine_floor double precision,
            ADD COLUMN relevance_cosine_ceiling double precision,
            ADD CONSTRAINT collections_relevance_scale_check CHECK (
                (relevance_cosine_floor IS NULL) = (relevance_cosine_ceiling IS NULL)
                AND relevance_cosine_floor < relevance_cosine_ceiling
            )
        """
    )


def downgrade() -> None:
    op.execute(
        """
        ALTER TABLE collections
            DROP CONSTRAINT collections_relevance_scale_check,
            DROP COLUMN relevance_cosine_ceiling,
            DROP COLUMN relevance_cosine_floor,
            DROP COLUMN relevance_fit
        """
    )
