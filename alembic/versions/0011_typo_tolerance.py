"""Typo tolerance: a query word the collection does not know matches close words it knows.

- `collections.typo_weight`: what a match of a correction weighs against an exact match of
  the same word, below 1; 0 turns corrections off.
- `bm25_terms_trgm_idx`: the trigrams of each collection's compacted vocabulary (`btree_gin`
  puts the collection in the same index), so the close known lexemes of a word are found by
  the index (`%`: trigram similarity at least `pg_trgm.similarity_threshold`, 0.3).
- `query_corrected(collection, config, text)`: `query_expanded`'s rows with `factor` 1, plus,
  for each query lexeme outside any fired synonym rule that the collection does not know
  (document frequency 0, compacted plus pending), the known lexeme closest to it: among those
  the trigram index finds, the fewest edits (`fuzzystrmatch`'s Levenshtein distance, at most
  1 plus one per `LETTERS_PER_EDIT` letters), then the more frequent, then the most similar
  trigrams. Its `factor` is `typo_weight` and `corrects` the lexeme it stands for. The
  unknown word and its correction form a group as a fired synonym rule does (`grp` negative,
  `alt` 0 and 1): relevance evidence counts the word covered where its correction is. Never
  corrected: a lexeme of fewer than `MIN_LENGTH` characters (too many close words), one
  holding anything but letters (numbers, SKUs, error codes, versions, hyphenated tokens), or
  a known one. A lexeme the query already holds is not added again. Words only in pending
  statistics (not yet compacted) are not candidates.

Revision ID: 0011
Revises: 0010
"""

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

DEFAULT_TYPO_WEIGHT = 0  # off: corrections cost a trigram search per unknown word
LETTERS_PER_EDIT = 6
NEAREST = 10
MIN_SIMILARITY = 0.3
MIN_LENGTH = 4


def upgrade() -> None:
    op.execute(
        f"""
        ALTER TABLE collections ADD COLUMN typo_weight double precision NOT NULL
            DEFAULT {DEFAULT_TYPO_WEIGHT} CHECK (typo_weight >= 0 AND typo_weight < 1)
        """
    )
    op.execute("CREATE EXTENSION IF NOT EXISTS btree_gist")
    op.execute("CREATE EXTENSION IF NOT EXISTS fuzzystrmatch")
    op.execute(
        "CREATE INDEX bm25_terms_trgm_idx ON bm25_terms"
        " USING gist (collection_id, lower(lexeme) gist_trgm_ops)"
    )
    op.execute(
        rf"""
        CREATE FUNCTION query_corrected(collection bigint, config regconfig, query text)
        RETURNS TABLE (lexeme text, qtf integer, grp integer, alt integer,
                       factor double precision, corrects text)
        LANGUAGE sql STABLE PARALLEL SAFE AS $$
            WITH expanded AS MATERIALIZED (
                SELECT e.lexeme, e.qtf, e.grp, e.alt
                FROM query_expanded(collection, config, query) AS e
            ), suspects AS (  -- unknown plain words, when the collection corrects
                SELECT x.lexeme, x.qtf
                FROM expanded AS x
                WHERE (SELECT c.typo_weight FROM collections AS c WHERE c.id = collection) > 0
                  AND x.grp IS NULL
                  AND char_length(x.lexeme) >= {MIN_LENGTH}
                  AND x.lexeme !~ '[\d\W_]'  -- letters only
                  AND coalesce((
                      SELECT sum(df) FROM (
                          SELECT df FROM bm25_terms
                          WHERE collection_id = collection AND lexeme = x.lexeme
                          UNION ALL
                          SELECT df FROM bm25_pending_terms
                          WHERE collection_id = collection AND lexeme = x.lexeme
                      ) AS s
                  ), 0) <= 0
            ), closest AS (
                SELECT DISTINCT ON (v.lexeme) v.lexeme, s.qtf, s.lexeme AS corrects
                FROM suspects AS s
                CROSS JOIN LATERAL (
                    SELECT n.lexeme, levenshtein(n.lexeme, s.lexeme) AS distance
                    FROM (  -- the nearest by trigrams, walking the index
                        SELECT t.lexeme, t.df, lower(t.lexeme) <-> s.lexeme AS far
                        FROM bm25_terms AS t
                        WHERE t.collection_id = collection
                        ORDER BY lower(t.lexeme) <-> s.lexeme
                        LIMIT {NEAREST}
                    ) AS n
                    WHERE n.far <= 1 - {MIN_SIMILARITY}
                    ORDER BY 2, n.df DESC, n.far, n.lexeme
                    LIMIT 1
                ) AS v
                WHERE v.distance <= 1 + char_length(s.lexeme) / {LETTERS_PER_EDIT}
                  AND NOT EXISTS (SELECT FROM expanded AS x WHERE x.lexeme = v.lexeme)
                ORDER BY v.lexeme, v.distance, s.lexeme
            ), corrections AS (  -- each its own group, below the rules' positions
                SELECT c.*, -row_number() OVER (ORDER BY c.corrects)::integer AS grp
                FROM closest AS c
            )
            SELECT x.lexeme, x.qtf, coalesce(x.grp, c.grp),
                   CASE WHEN c.grp IS NULL THEN x.alt ELSE 0 END,
                   1.0::double precision, NULL::text
            FROM expanded AS x
            LEFT JOIN corrections AS c ON c.corrects = x.lexeme
            UNION ALL
            SELECT c.lexeme, c.qtf, c.grp, 1, k.typo_weight, c.corrects
            FROM corrections AS c
            JOIN collections AS k ON k.id = collection
        $$
        """  # noqa: S608
    )


def downgrade() -> None:
    op.execute("DROP FUNCTION query_corrected(bigint, regconfig, text)")
    op.execute("DROP INDEX bm25_terms_trgm_idx")
    op.execute("DROP EXTENSION IF EXISTS fuzzystrmatch")
    op.execute("DROP EXTENSION IF EXISTS btree_gist")
    op.execute("ALTER TABLE collections DROP COLUMN typo_weight")
