"""`query_corrected` gives the question respelled too: its misspelled words are found once.

A search with a word the vector side could respell (four letters or more, no common word: 76
of `bench.search`'s 200 real questions) ran the suspects and their closest common words twice:
in `query_corrected`, for keyword search, the relevance evidence and the highlights
(`query_lexemes.sql`), and in `query_respelled` (migration 0021), for the text the vector side
embeds: 0.76 to 1.0 ms of PostgreSQL more a search where asked, and one statement more.

Now `query_corrected` returns, besides its lexemes, one row for each word the vector side
respells: `typed` (the word as typed, lower case) and `word` (the common word keyword search
reads it as), the other columns NULL; its lexeme rows have those two NULL. The choice is 0021's:
every suspect whose closest common word is found, a stop word too ("witi" is "with": keyword
search drops it, the model reads it), whether or not the corrected lexeme is in the question
already. The lexemes are 0019's, row for row: a suspect's closest common word is looked up once
(`nearest`), and the collection's own lexemes only where there is none. `query_respelled` goes.

Revision ID: 0023
Revises: 0022
"""

from alembic import op

from cari.db.migrations import earlier_revision

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

_0019 = earlier_revision("0019")
_0021 = earlier_revision("0021")

QUERY_CORRECTED = (
    r"""
    CREATE FUNCTION query_corrected(collection bigint, config regconfig, query text)
    RETURNS TABLE (lexeme text, qtf integer, grp integer, alt integer,
                   factor double precision, corrects text, typed text, word text)
    LANGUAGE sql STABLE PARALLEL SAFE AS $$
"""  # noqa: S608
    + _0019.SUSPECTS
    + r"""
        ), nearest AS MATERIALIZED (  -- each suspect's closest common word, if any
            SELECT s.lexeme AS corrects, s.qtf, s.token, n.lexeme, n.word, n.distance
            FROM suspects AS s
            LEFT JOIN LATERAL (
"""
    + _0019.common_word("n.lexeme, n.word, n.distance", word=" g.word,")
    + rf"""
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
                        SELECT t.lexeme, t.df, {_0019._distance("t.lexeme", "s.corrects")}
                                   AS distance,
                               1 - similarity(t.lexeme, s.corrects) AS far
                        FROM bm25_terms AS t
                        WHERE s.word IS NULL
                          AND char_length(s.corrects) >= {_0019.MIN_LENGTH}
                          AND lexeme_neighbours(t.collection_id, t.lexeme)
                              && lexeme_neighbours(collection, s.corrects)
                          AND t.collection_id + 0 = collection
                          AND t.df > 0
                          AND char_length(t.lexeme) >= {_0019.MIN_NEIGHBOUR_LENGTH}
                    ) AS n
                    WHERE n.distance <= 1 + char_length(s.corrects) / {_0019.LETTERS_PER_EDIT}
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
)


def upgrade() -> None:
    op.execute("DROP FUNCTION query_respelled(bigint, regconfig, text)")
    op.execute("DROP FUNCTION query_corrected(bigint, regconfig, text)")
    op.execute(QUERY_CORRECTED)


def downgrade() -> None:
    op.execute("DROP FUNCTION query_corrected(bigint, regconfig, text)")
    op.execute(_0019.QUERY_CORRECTED)
    op.execute(_0021.QUERY_RESPELLED)
