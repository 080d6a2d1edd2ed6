"""Collections announce their changes: a serving process keeps the rows its searches read.

`collections_changed`, a statement trigger on `collections`, notifies the channel
`cari_collections` after every insert, update, delete or truncate, whoever runs it (a server,
the CLI, a DBA). PostgreSQL delivers the notification when the transaction commits and folds
repeats within one transaction. `cari.search.collection_rows` listens on it.

Revision ID: 0012
Revises: 0011
"""

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE FUNCTION collections_changed() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('cari_collections', '');
            RETURN NULL;
        END
        $$
        """
    )
    op.execute(
        """
        CREATE TRIGGER collections_changed
        AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON collections
        FOR EACH STATEMENT EXECUTE FUNCTION collections_changed()
        """
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER collections_changed ON collections")
    op.execute("DROP FUNCTION collections_changed()")
