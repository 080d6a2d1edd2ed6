"""Embeddings of any width up to 4,000, and an embedder per collection.

- `chunks.embedding` and `catalog_items.embedding` become untyped `vector`: collections embedded
  by models of different widths share the tables. Each width has its own partial HNSW index on
  an expression, `halfvec` from CARI_HALFVEC_DIMENSIONS up (cari.vector_space). The one index
  over `vector(D)` is replaced by the index of width D, built here (on a large table this
  revision takes as long as that build).
- `collections.embedder`: the embedder it names (NULL: the default one); `dimensions`: the
  width of its stored vectors, checked against its embedder's at start-up; `next_embedder`:
  the embedder `cari reembed --embedder` is moving it to, whose vectors fill
  `next_embedding` until they are complete and swapped in.

Revision ID: 0010
Revises: 0009
"""

from alembic import context, op
from psycopg import sql

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

TABLES = ("chunks", "catalog_items")


def _execute(statement: sql.Composable) -> None:
    op.get_bind().connection.driver_connection.execute(statement)  # type: ignore[union-attr]


def upgrade() -> None:
    from cari.db.migrations import vector_index_statement
    from cari.db.vector_space import space

    settings = context.config.attributes["settings"]
    row = (
        op.get_bind()
        .exec_driver_sql(
            "SELECT atttypmod FROM pg_attribute "
            "WHERE attrelid = 'chunks'::regclass AND attname = 'embedding'"
        )
        .fetchone()
    )
    assert row is not None
    width = int(row[0])
    for table in TABLES:
        op.execute(f"DROP INDEX IF EXISTS {table}_embedding_idx")
        # To typmod -1 no vector changes: PostgreSQL relabels the column without a rewrite. A
        # new type resets the storage to EXTERNAL: MAIN again (migration 0006 says why).
        op.execute(
            f"""
            ALTER TABLE {table} ALTER COLUMN embedding TYPE vector,
                ALTER COLUMN embedding SET STORAGE MAIN,
                ADD COLUMN next_embedding vector,
                ALTER COLUMN next_embedding SET STORAGE MAIN
            """
        )
    # The width's default only serves rows written by hand: Cari states each collection's.
    op.execute(
        f"""
        ALTER TABLE collections
            ADD COLUMN embedder text CHECK (embedder ~ '^[a-z0-9][a-z0-9_-]{{0,62}}$'),
            ADD COLUMN next_embedder text CHECK (next_embedder ~ '^[a-z0-9][a-z0-9_-]{{0,62}}$'),
            ADD COLUMN dimensions integer NOT NULL DEFAULT {width}
                CHECK (dimensions BETWEEN 1 AND 16000)
        """
    )
    # What halfvec indexes are built on and searches order by (cari.vector_space): a vector too
    # wide for a page lives in TOAST, and PostgreSQL costs an exact scan as if it read the row
    # alone: at 5,000 chunks of 3,072 dimensions it chose one (66 ms) over the HNSW index
    # (1.5 ms). This function's cost stands for reading and converting such a vector: with
    # 10,000 the planner takes the index for a top 100 of 400 chunks (3.5 ms against 9.6 ms
    # exact), with 1,000 only from about 1,500 (bench.halfvec measures it). PL/pgSQL: an SQL
    # function would be inlined, and its cost with it. The type is qualified by pgvector's
    # schema: index builds and ANALYZE run the body with a search_path of pg_catalog alone.
    found = (
        op.get_bind()
        .exec_driver_sql(
            "SELECT n.nspname FROM pg_extension AS e "
            "JOIN pg_namespace AS n ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
        )
        .fetchone()
    )
    assert found is not None
    _execute(
        sql.SQL(
            """
            CREATE FUNCTION cari_halfvec(v vector) RETURNS halfvec
            LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE COST 10000
            AS {body}
            """
        ).format(
            body=sql.Literal(
                sql.SQL("BEGIN RETURN v::{}.halfvec; END")
                .format(sql.Identifier(found[0]))
                .as_string(None)
            )
        )
    )
    for table in TABLES:
        # Without statistics on the widths the planner guesses 0.5 % of the rows match
        # `vector_dims(embedding) = d` and, for a wide vector, sorts them all instead of
        # reading the index (bench.halfvec met it at 1,536 dimensions); and a collection's
        # width depends on the collection (dependencies), not a share of it.
        op.execute(
            f"CREATE STATISTICS {table}_embedding_dims (dependencies) "
            f"ON collection_id, (vector_dims(embedding)) FROM {table}"
        )
        op.execute(f"ANALYZE {table}")
        _execute(vector_index_statement(space(width, settings), table, settings))


def downgrade() -> None:
    settings = context.config.attributes["settings"]
    width = int(settings.embedding_dimension)
    indexes = op.get_bind().exec_driver_sql(
        "SELECT indexname FROM pg_indexes WHERE tablename IN ('chunks', 'catalog_items') "
        "AND indexname ~ '^(chunks|catalog_items)_embedding_(vector|halfvec)_[0-9]+_idx$'"
    )
    for (index,) in indexes.fetchall():
        op.execute(f"DROP INDEX {index}")
    op.execute("DROP FUNCTION IF EXISTS cari_halfvec(vector)")
    op.execute("ALTER TABLE collections DROP COLUMN embedder, DROP COLUMN next_embedder")
    op.execute("ALTER TABLE collections DROP COLUMN dimensions")
    for table in TABLES:
        op.execute(f"DROP STATISTICS IF EXISTS {table}_embedding_dims")
        # Vectors of another width than the default embedder's cannot stay in vector(width).
        op.execute(
            f"""
            ALTER TABLE {table} DROP COLUMN next_embedding,
                ALTER COLUMN embedding TYPE vector({width}) USING
                    CASE WHEN vector_dims(embedding) = {width} THEN embedding END,
                ALTER COLUMN embedding SET STORAGE MAIN
            """
        )
        if width <= 2000:  # pgvector's HNSW limit for `vector`: 0001 builds none wider either
            op.execute(
                f"CREATE INDEX {table}_embedding_idx ON {table}"
                " USING hnsw (embedding vector_cosine_ops)"
                f" WITH (m = {settings.hnsw_m}, ef_construction = {settings.hnsw_ef_construction})"
            )
