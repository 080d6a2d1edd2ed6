"""`query_corrected` looks each thing up once per candidate: a misspelled question is analysed
~12 % faster.

In migration 0023's function, each common word one deletion from a suspect (a plain word the
collection does not know, typed as no common word) was analysed by `query_terms`, whose stop-word
check the generic plan of `query_lexemes.sql` (the plan the service runs) made a hash join built
anew for every candidate: a sequential scan of `query_stopwords`, a hash table and a scan of its
buckets for each word. The candidate's df was read twice, for the filter and for the order; and
each suspect's word as typed was found in `typed` three times.

Now a candidate is analysed by `to_tsvector` directly, its lexeme checked against the language's
query stop words, read once into an array; its df is one lateral probe of `bm25_terms`; a suspect's
word as typed is one lateral lookup. The rows are 0023's, row for row (compared on the 400 real
and misspelled questions of `bench.search` against its 100k-chunk collection and on 2,400
analyses over the six collections of `bench.threshold`; `tests/test_typos.py` compares the two
on every run). `query_lexemes.sql` on those 200 questions misspelled, at 100k chunks, three
rounds: mean 0.97 / 0.97 / 1.00 -> 0.84 / 0.85 / 0.89 ms, p95 2.07 / 2.17 / 2.21 -> 1.72 /
1.78 / 1.83 ms; as written, unchanged (0.48 / 0.48 -> 0.47 / 0.47 ms after the first round).

Revision ID: 0024
Revises: 0023
"""

from alembic import op

from cari.db.migrations import earlier_revision

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

_0019 = earlier_revision("0019")
_0023 = earlier_revision("0023")
MIN_LENGTH: int = _0019.MIN_LENGTH
MIN_NEIGHBOUR_LENGTH: int = _0019.MIN_NEIGHBOUR_LENGTH
LETTERS_PER_EDIT: int = _0019.LETTERS_PER_EDIT
_distance = _0019._distance

QUERY_CORRECTED = rf"""
    CREATE OR REPLACE FUNCTION query_corrected(collection bigint, config regconfig, query text)
    RETURNS TABLE (lexeme text, qtf integer, grp integer, alt integer,
                   factor double precision, corrects text, typed text, word text)
    LANGUAGE sql STABLE PARALLEL SAFE AS $$
        WITH expanded AS MATERIALIZED (
            SELECT e.lexeme, e.qtf, e.grp, e.alt
            FROM query_expanded(collection, config, query) AS e
        ), typed AS MATERIALIZED (  -- read only when a word is unknown
            SELECT DISTINCT w.token, m.lexeme
            FROM regexp_split_to_table(lower(query), '[^[:alpha:]]+') AS w (token)
            CROSS JOIN LATERAL unnest(tsvector_to_array(to_tsvector(config, w.token))) AS m (lexeme)
            WHERE w.token <> ''
        ), suspects AS MATERIALIZED (  -- unknown plain words, long enough, not common words
            SELECT x.lexeme, x.qtf, t.token
            FROM expanded AS x
            CROSS JOIN LATERAL (
                SELECT min(t.token) AS token FROM typed AS t WHERE t.lexeme = x.lexeme
            ) AS t
            WHERE (SELECT c.typo_weight FROM collections AS c WHERE c.id = collection) > 0
              AND x.grp IS NULL
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
              AND greatest(char_length(x.lexeme), char_length(t.token)) >= {MIN_LENGTH}
              AND NOT EXISTS (SELECT FROM typo_words AS g WHERE g.word = t.token)
        ), nearest AS MATERIALIZED (  -- each suspect's closest common word, if any
            SELECT s.lexeme AS corrects, s.qtf, s.token, n.lexeme, n.word, n.distance
            FROM suspects AS s
            LEFT JOIN LATERAL (
                -- common words one deletion from the typed word on either side, as the
                -- collection's language analyses them: a lexeme it knows (its df one probe of
                -- the primary key), or none (a stop word, first among equals: "witi" is "with",
                -- not "citi")
                SELECT n.lexeme, n.word, n.distance
                FROM (
                    SELECT m.lexeme, g.word, d.df,
                           {_distance("g.word", "s.token")} AS distance,
                           1 - similarity(g.word, s.token) AS far
                    FROM typo_words AS g
                    LEFT JOIN LATERAL (
                        SELECT a.lexeme
                        FROM unnest(tsvector_to_array(to_tsvector(config, g.word))) AS a (lexeme)
                        WHERE a.lexeme <> ALL (ARRAY(  -- the language's query stop words, once
                            SELECT p.lexeme FROM query_stopwords AS p WHERE p.language = config
                        ))
                    ) AS m ON true
                    LEFT JOIN LATERAL (
                        SELECT t.df FROM bm25_terms AS t
                        WHERE t.collection_id = collection AND t.lexeme = m.lexeme
                    ) AS d ON true
                    WHERE lexeme_neighbours(0, g.word) && lexeme_neighbours(0, s.token)
                ) AS n
                WHERE (n.lexeme IS NULL OR n.df > 0)
                  AND n.distance <= 1 + char_length(s.token) / {LETTERS_PER_EDIT}
                ORDER BY n.distance, n.lexeme IS NOT NULL, n.df DESC, n.far, n.lexeme
                LIMIT 1
            ) AS n ON true
        ), closest AS (
            SELECT DISTINCT ON (v.lexeme) v.lexeme, s.qtf, s.corrects
            FROM nearest AS s
            CROSS JOIN LATERAL (
                SELECT s.lexeme, s.distance WHERE s.word IS NOT NULL
                UNION ALL
                (  -- else the collection's lexemes one deletion from the unknown lexeme (the GIN
                   -- index alone: `+ 0` keeps the collection check out of the primary key)
                    SELECT n.lexeme, n.distance
                    FROM (
                        SELECT t.lexeme, t.df, {_distance("t.lexeme", "s.corrects")}
                                   AS distance,
                               1 - similarity(t.lexeme, s.corrects) AS far
                        FROM bm25_terms AS t
                        WHERE s.word IS NULL
                          AND char_length(s.corrects) >= {MIN_LENGTH}
                          AND lexeme_neighbours(t.collection_id, t.lexeme)
                              && lexeme_neighbours(collection, s.corrects)
                          AND t.collection_id + 0 = collection
                          AND t.df > 0
                          AND char_length(t.lexeme) >= {MIN_NEIGHBOUR_LENGTH}
                    ) AS n
                    WHERE n.distance <= 1 + char_length(s.corrects) / {LETTERS_PER_EDIT}
                    ORDER BY n.distance, n.df DESC, n.far, n.lexeme
                    LIMIT 1
                )
            ) AS v
            WHERE v.lexeme IS NOT NULL  -- a stop word mistyped: nothing to search
              AND NOT EXISTS (SELECT FROM expanded AS x WHERE x.lexeme = v.lexeme)
            ORDER BY v.lexeme, v.distance, s.corrects
        ), corrections AS (  -- each its own group, below the rules' positions
            SELECT c.*, -row_number() OVER (ORDER BY c.corrects)::integer AS grp
            FROM closest AS c
        )
        SELECT x.lexeme, x.qtf, coalesce(x.grp, c.grp),
               CASE WHEN c.grp IS NULL THEN x.alt ELSE 0 END,
               1.0::double precision, NULL::text, NULL::text, NULL::text
        FROM expanded AS x
        LEFT JOIN corrections AS c ON c.corrects = x.lexeme
        UNION ALL
        SELECT c.lexeme, c.qtf, c.grp, 1, k.typo_weight, c.corrects, NULL, NULL
        FROM corrections AS c
        JOIN collections AS k ON k.id = collection
        UNION ALL
        SELECT DISTINCT NULL::text, NULL::integer, NULL::integer, NULL::integer,
                        NULL::double precision, NULL::text, s.token, s.word
        FROM nearest AS s
        WHERE s.word IS NOT NULL  -- a word typed once, whatever its lexemes
    $$
"""  # noqa: S608


def upgrade() -> None:
    op.execute(QUERY_CORRECTED)


def downgrade() -> None:
    op.execute("DROP FUNCTION query_corrected(bigint, regconfig, text)")
    op.execute(_0023.QUERY_CORRECTED)
