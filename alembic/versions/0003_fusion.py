"""Fusion methods: weighted RRF, or a convex combination of min-max or z-score normalised scores.

Collections that exist keep weighted RRF, the fusion they were tuned with; new collections get
the default chosen by measurement (docs/benchmarks.md, "Fusion").

Revision ID: 0003
Revises: 0002
"""

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

NEW_DEFAULT = "zscore"


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE collections
            ADD COLUMN fusion text NOT NULL DEFAULT 'rrf'
                CHECK (fusion IN ('rrf', 'minmax', 'zscore'))
        """
    )
    op.execute(f"ALTER TABLE collections ALTER COLUMN fusion SET DEFAULT '{NEW_DEFAULT}'")


def downgrade() -> None:
    op.execute("ALTER TABLE collections DROP COLUMN fusion")
