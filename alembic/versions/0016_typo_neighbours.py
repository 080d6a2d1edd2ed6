"""Typo tolerance finds a word's corrections by its one-deletion neighbours, not a trigram walk.

The trigram GiST's nearest-neighbour search (`bm25_terms_trgm_idx`, migration 0011) cost
~40-250 ms a misspelled word once a collection's vocabulary is compacted (166,948 lexemes at
100k chunks), whether the index was grown by inserts or built at once. Instead:

- `lexeme_neighbours(collection, lexeme)`: the word itself and each spelling with one of its
  letters deleted, hashed with the collection as seed (`bigint[]`); NULL for a lexeme holding
  anything but letters or of fewer than `MIN_NEIGHBOUR_LENGTH` letters. Two words one
  insertion, deletion, substitution or transposition of neighbours apart share a neighbour
  (a symmetric deletion neighbourhood); so do some two edits apart (a letter inserted in one
  place and another deleted elsewhere).
- `bm25_terms_neighbours_idx`: a GIN index of each compacted lexeme's neighbours, which
  PostgreSQL maintains with the table (no write path changes), without a pending list
  (`fastupdate` off: every search would scan the unsorted list of the entries compactions
  added until a vacuum merged it); the trigram GiST is dropped.
- `bm25_terms` keeps `TERMS_FILLFACTOR` % of each page for its rows, the rest for the new
  versions a compaction's df updates write: with room on the page an update is HOT and
  touches no index (neither this GIN's ~9 entries a word, nor the GiST's or the primary
  key's). A full page (the default, 100) made every update a new entry in each index: with
  the GIN, compacting 200 chunks' terms at 100k cost ~4-6 ms a chunk (GiST ~1.8, no typo
  index ~0.8); at 70, ~0.5 with either. Pages written before this keep their rows until
  they are rewritten (`cari bm25 repair`, `VACUUM FULL bm25_terms`).
- `query_corrected`: the candidates of an unknown query lexeme are the known lexemes (df
  above 0) sharing a neighbour with it, a few index entries read; the choice among them is
  0011's: the fewest edits (Levenshtein, at most 1 plus one per `LETTERS_PER_EDIT` letters),
  then the more frequent, then the more similar trigrams, then the lexeme. A known lexeme
  more than one deletion from the word on either side is no longer a candidate (0011 could
  find one among its ten nearest by trigrams).

Revision ID: 0016
Revises: 0015
"""

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

LETTERS_PER_EDIT = 6
MIN_LENGTH = 4  # a query lexeme shorter is never corrected
MIN_NEIGHBOUR_LENGTH = MIN_LENGTH - 1  # one insertion away from the shortest corrected word
NEAREST = 10  # 0011's trigram candidates
MIN_SIMILARITY = 0.3  # 0011's
TERMS_FILLFACTOR = 70


def _query_corrected(candidates: str, order: str) -> str:
    """`query_corrected` whose `closest` takes, for unknown lexeme `s.lexeme`, the known
    lexemes from `candidates` (columns lexeme, df, far) in the order `order`."""
    return rf"""
        CREATE OR REPLACE FUNCTION query_corrected(collection bigint, config regconfig,
                                                   query text)
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
                    FROM ({candidates}) AS n
                    ORDER BY {order}
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


NEIGHBOURS = f"""
    -- the known lexemes one deletion from the word on either side, read from the GIN index
    -- alone: its keys are the collection's (a generic plan would AND it with the primary
    -- key's whole collection, hence `+ 0`, which keeps the check out of any index)
    SELECT t.lexeme, t.df, 1 - similarity(t.lexeme, s.lexeme) AS far
    FROM bm25_terms AS t
    WHERE lexeme_neighbours(t.collection_id, t.lexeme)
          && lexeme_neighbours(collection, s.lexeme)
      AND t.collection_id + 0 = collection
      AND t.df > 0
      AND char_length(t.lexeme) >= {MIN_NEIGHBOUR_LENGTH}
"""  # noqa: S608

NEAREST_BY_TRIGRAMS = f"""
    -- the nearest by trigrams, walking the index
    SELECT * FROM (
        SELECT t.lexeme, t.df, lower(t.lexeme) <-> s.lexeme AS far
        FROM bm25_terms AS t
        WHERE t.collection_id = collection
        ORDER BY lower(t.lexeme) <-> s.lexeme
        LIMIT {NEAREST}
    ) AS n
    WHERE n.far <= 1 - {MIN_SIMILARITY}
"""  # noqa: S608

ORDER = "2, n.df DESC, n.far, n.lexeme"


LEXEME_NEIGHBOURS = rf"""
    CREATE OR REPLACE FUNCTION lexeme_neighbours(collection bigint, lexeme text) RETURNS bigint[]
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN CASE
        WHEN lexeme !~ '[\d\W_]' AND char_length(lexeme) >= {MIN_NEIGHBOUR_LENGTH}
        THEN ARRAY(  -- i above the length deletes nothing: the word itself
            SELECT hashtextextended(left(lexeme, i - 1) || substr(lexeme, i + 1), collection)
            FROM generate_series(1, char_length(lexeme) + 1) AS i
        )
    END
"""  # noqa: S608


def upgrade() -> None:
    op.execute(LEXEME_NEIGHBOURS)
    op.execute(
        "CREATE INDEX bm25_terms_neighbours_idx ON bm25_terms"
        " USING gin (lexeme_neighbours(collection_id, lexeme)) WITH (fastupdate = off)"
    )
    op.execute(_query_corrected(NEIGHBOURS, ORDER))
    op.execute("DROP INDEX bm25_terms_trgm_idx")
    op.execute(f"ALTER TABLE bm25_terms SET (fillfactor = {TERMS_FILLFACTOR})")


def downgrade() -> None:
    op.execute("ALTER TABLE bm25_terms RESET (fillfactor)")
    op.execute(
        "CREATE INDEX bm25_terms_trgm_idx ON bm25_terms"
        " USING gist (collection_id, lower(lexeme) gist_trgm_ops)"
    )
    op.execute(_query_corrected(NEAREST_BY_TRIGRAMS, ORDER))
    op.execute("DROP INDEX bm25_terms_neighbours_idx")
    op.execute("DROP FUNCTION lexeme_neighbours(bigint, text)")
