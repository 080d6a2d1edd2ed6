"""`query_corrected` looks each thing up once per candidate: a misspelled question is analysed
~12 % faster.

In migration 0023's function, each common word one deletion from a suspect (a plain word the
collection does not know, typed as no common word) was analysed by `query_terms`, whose stop-word
check the generic plan of `query_lexemes.sql` (the plan the service runs) made a hash join built
anew for every candidate: a sequential scan of `query_stopwords`, a hash table and a scan of its
buckets for each word. The candidate's df was read twice, for the filter and for the order; and
each suspect's word as typed was found in `typed` three times.

Now a candidate is analysed by `to_tsvector` directly, its lexeme checked against the language's
query stop words, read once into an array; its df is one lateral probe of `bm25_terms`; a
suspect's word as typed is one lateral lookup: 0023's function with those three pieces replaced.
The rows are 0023's, row for row (compared on the 400 real and misspelled questions of
`bench.search` against its 100k-chunk collection and on 2,400 analyses over the six collections
of `bench.threshold`; `tests/test_typos.py` compares the two on every run). `query_lexemes.sql`
on those 200 questions misspelled, at 100k chunks, three rounds: mean 0.97 / 0.97 / 1.00 ->
0.84 / 0.85 / 0.89 ms, p95 2.07 / 2.17 / 2.21 -> 1.72 / 1.78 / 1.83 ms; as written, unchanged
(0.48 / 0.48 -> 0.47 / 0.47 ms after the first round).

Revision ID: 0024
Revises: 0023
"""

from alembic import op

from cari.db.migrations import earlier_revision, edited

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

_0023 = earlier_revision("0023")


# A suspect's word as typed: one lateral aggregate, where 0019's scalar subquery was evaluated
# for each of the three places that read it.
TYPED_ONCE = (
    """            SELECT x.lexeme, x.qtf,
                   (SELECT min(t.token) FROM typed AS t WHERE t.lexeme = x.lexeme) AS token
            FROM expanded AS x
""",
    """            SELECT x.lexeme, x.qtf, t.token
            FROM expanded AS x
            CROSS JOIN LATERAL (
                SELECT min(t.token) AS token FROM typed AS t WHERE t.lexeme = x.lexeme
            ) AS t
""",
)
# A candidate's df: one lateral probe, where the scalar subquery was evaluated for the filter
# and again for the order.
DF_ONCE = (
    """                               (SELECT t.df FROM bm25_terms AS t
                                WHERE t.collection_id = collection AND t.lexeme = m.lexeme)
                                   AS df,
""",
    """                               d.df,
""",
)
# A candidate's lexeme: `to_tsvector` less the language's query stop words, read once, where
# `query_terms`' stop-word check became a hash join built anew for each candidate.
ANALYSED_ONCE = (
    """                        LEFT JOIN LATERAL query_terms(config, g.word) AS m ON true
""",
    """                        LEFT JOIN LATERAL (
                            SELECT a.lexeme
                            FROM unnest(tsvector_to_array(to_tsvector(config, g.word)))
                                 AS a (lexeme)
                            WHERE a.lexeme <> ALL (ARRAY(  -- the language's query stop words, once
                                SELECT p.lexeme FROM query_stopwords AS p WHERE p.language = config
                            ))
                        ) AS m ON true
                        LEFT JOIN LATERAL (
                            SELECT t.df FROM bm25_terms AS t
                            WHERE t.collection_id = collection AND t.lexeme = m.lexeme
                        ) AS d ON true
""",
)

QUERY_CORRECTED = edited(
    _0023.QUERY_CORRECTED,
    ("CREATE FUNCTION query_corrected(", "CREATE OR REPLACE FUNCTION query_corrected("),
    TYPED_ONCE,
    DF_ONCE,
    ANALYSED_ONCE,
)


def upgrade() -> None:
    op.execute(QUERY_CORRECTED)


def downgrade() -> None:
    op.execute("DROP FUNCTION query_corrected(bigint, regconfig, text)")
    op.execute(_0023.QUERY_CORRECTED)
