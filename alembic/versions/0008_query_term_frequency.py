"""Query term frequency: a lexeme the query repeats weighs more, as in every reference BM25.

- `collections.bm25_k3`: Okapi's query-term saturation. A lexeme found `qtf` times in the query
  weighs `qtf·(k3+1)/(k3+qtf)`: 1 for a lexeme said once whatever k3; k3 0 counts every lexeme
  once (the scoring before this revision); a large k3 counts repeats almost linearly, as
  Lucene and bm25s do. `bm25_query_weight(qtf, k3)` is that weight, for keyword search and
  the relevance evidence alike.
- `query_terms(config, text)`: a query's lexemes with their number of occurrences, less the
  configuration's query stop words. It replaces `query_lexemes`, which gave the lexemes alone.

Revision ID: 0008
Revises: 0007
"""

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

# Chosen on the tuning sets (docs/bm25.md); collection_create's default is the same.
DEFAULT_K3 = 1000.0


def upgrade() -> None:
    op.execute(
        f"""
        ALTER TABLE collections ADD COLUMN bm25_k3 double precision NOT NULL
            DEFAULT {DEFAULT_K3} CHECK (bm25_k3 >= 0 AND bm25_k3 <= 1000)
        """
    )
    op.execute(
        """
        CREATE FUNCTION bm25_query_weight(qtf double precision, k3 double precision)
        RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE
        RETURN qtf * (k3 + 1) / (k3 + qtf)
        """
    )
    # PostgreSQL keeps a lexeme's positions in the query's tsvector: their count is how often
    # the query says it.
    op.execute(
        """
        CREATE FUNCTION query_terms(config regconfig, query text)
        RETURNS TABLE (lexeme text, qtf integer) LANGUAGE sql STABLE PARALLEL SAFE AS $$
            SELECT w.lexeme, cardinality(w.positions)
            FROM unnest(to_tsvector(config, query)) AS w
            WHERE NOT EXISTS (
                SELECT FROM query_stopwords AS s
                WHERE s.language = config AND s.lexeme = w.lexeme
            )
        $$
        """
    )
    op.execute("DROP FUNCTION query_lexemes(regconfig, text)")


def downgrade() -> None:
    op.execute(
        """
        CREATE FUNCTION query_lexemes(config regconfig, query text)
        RETURNS SETOF text LANGUAGE sql STABLE PARALLEL SAFE AS $$
            SELECT DISTINCT w.lexeme
            FROM unnest(to_tsvector(config, query)) AS w
            WHERE NOT EXISTS (
                SELECT FROM query_stopwords AS s
                WHERE s.language = config AND s.lexeme = w.lexeme
            )
        $$
        """
    )
    op.execute("DROP FUNCTION query_terms(regconfig, text), bm25_query_weight")
    op.execute("ALTER TABLE collections DROP COLUMN bm25_k3")
