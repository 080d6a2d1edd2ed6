"""A collection's "no information" sentence, the answer when no source passes the threshold.

NULL means the default in the question's language (Indonesian or English).

Revision ID: 0005
Revises: 0004
"""

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE collections ADD COLUMN no_information text"
        " CHECK (length(no_information) BETWEEN 1 AND 1000)"
    )


def downgrade() -> None:
    op.execute("ALTER TABLE collections DROP COLUMN no_information")
