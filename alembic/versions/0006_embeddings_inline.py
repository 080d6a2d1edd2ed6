"""Embeddings stored inside the table's rows, not in its TOAST table.

pgvector's `vector` type defaults to EXTERNAL storage: once a row passes ~2 kB (a 384-d vector is
1.5 kB, plus the chunk's text and tsvector) the vector moves out of line, and every row a search
returns, or an exact scan reads, fetches it from TOAST. On TyDi (4,692 chunks) an exact scan
took 22 ms that way against ~1 ms for the HNSW scan, and PostgreSQL's planner, which does not
cost that fetch, picked the exact scan once `ef_search` was 100. MAIN keeps the vector in the row
and moves the text and tsvector out first; a vector too wide for a page still goes out of line.

Rows written before this revision keep their layout until rewritten (`VACUUM FULL chunks`).

Revision ID: 0006
Revises: 0005
"""

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE chunks ALTER COLUMN embedding SET STORAGE MAIN")
    op.execute("ALTER TABLE catalog_items ALTER COLUMN embedding SET STORAGE MAIN")


def downgrade() -> None:
    op.execute("ALTER TABLE chunks ALTER COLUMN embedding SET STORAGE EXTERNAL")
    op.execute("ALTER TABLE catalog_items ALTER COLUMN embedding SET STORAGE EXTERNAL")
