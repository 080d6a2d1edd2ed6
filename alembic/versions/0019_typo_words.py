"""Typo tolerance reads the words people type: a general word list of English and Indonesian.

Until now an unknown query word was compared with the collection's lexemes alone, and a
misspelling the stemmer could not reduce was compared with stems: "efficiencuy" stays
"efficiencuy", one edit from "efficiency" but far from its lexeme "effici"; "complers" became
"complex", one edit from the unreduced "compler", where "compilers" (lexeme "compil") was
meant; "isses" reduces to "iss", too short to correct. Measured on CACM's misspelled questions,
a third of the misspelled content words were left or corrected wrongly this way.

- `typo_words`: the `WORDS` most frequent words of each language of `LANGUAGES` in `wordfreq`'s
  lists (letters only, at least `MIN_NEIGHBOUR_LENGTH` of them, lower case), indexed by their
  one-deletion neighbours (`lexeme_neighbours` with seed 0, as migration 0016 indexes the
  collections' lexemes). They are loaded from the installed `wordfreq` package, not shipped.
- `query_corrected`: for an unknown query lexeme, the word as typed (lower case: the query's
  runs of letters whose lexeme it is) is looked up first:
  - a common word (in `typo_words`) is a word, not a typo: it is not corrected, whatever the
    collection lacks (an off-topic question's words are not bent into the collection's);
  - else its candidates are the common words sharing a neighbour with it, each analysed as the
    collection's language analyses it and kept where the collection knows the lexeme (df above
    0) or where it is a stop word; only when there is none, as before, the collection's
    lexemes sharing a neighbour with the unknown lexeme. The choice: the fewest edits (two
    neighbouring letters swapped count one, `_distance`), then a stop word (a mistyped "with"
    is dropped, not turned into the collection's "city"), then the more frequent in the
    collection, then the more similar trigrams, then the lexeme.
  A typed word of `MIN_LENGTH` letters or more is now a suspect even when its lexeme is
  shorter ("isses"); the collection's own lexemes are still compared only from `MIN_LENGTH`.
- `collections.typo_weight` defaults to `TYPO_WEIGHT`: a new collection corrects typos. Those
  that exist keep their setting.

Revision ID: 0019
Revises: 0018
"""

import sqlalchemy as sa
from alembic import op

from cari.db.migrations import earlier_revision

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

TYPO_WEIGHT = 0.7  # a new collection's: typo tolerance on (0011 left it off, at 0)
LANGUAGES = ("en", "id")  # wordfreq's codes: the languages Cari's product speaks
WORDS = 50_000  # of each language at most, the most frequent first (Indonesian has ~31k)


_0016 = earlier_revision("0016")
MIN_LENGTH: int = _0016.MIN_LENGTH
MIN_NEIGHBOUR_LENGTH: int = _0016.MIN_NEIGHBOUR_LENGTH
LETTERS_PER_EDIT: int = _0016.LETTERS_PER_EDIT


def general_words() -> list[str]:
    """The common words of `LANGUAGES`, as `typo_words` holds them."""
    from wordfreq import top_n_list

    return sorted(
        {
            word
            for language in LANGUAGES
            for word in top_n_list(language, WORDS)
            if word.isalpha() and len(word) >= MIN_NEIGHBOUR_LENGTH and word == word.lower()
        }
    )


def upgrade() -> None:
    op.execute("CREATE TABLE typo_words (word text PRIMARY KEY)")
    op.execute(
        sa.text("INSERT INTO typo_words (word) SELECT unnest(CAST(:words AS text[]))").bindparams(
            words=general_words()
        )
    )
    op.execute(
        "CREATE INDEX typo_words_neighbours_idx ON typo_words"
        " USING gin (lexeme_neighbours(0, word)) WITH (fastupdate = off)"
    )
    op.execute("ANALYZE typo_words")
    op.execute(QUERY_CORRECTED)
    op.execute(f"ALTER TABLE collections ALTER COLUMN typo_weight SET DEFAULT {TYPO_WEIGHT}")


def downgrade() -> None:
    op.execute(
        "ALTER TABLE collections ALTER COLUMN typo_weight"
        f" SET DEFAULT {earlier_revision('0011').DEFAULT_TYPO_WEIGHT}"
    )
    op.execute(_0016._query_corrected(_0016.NEIGHBOURS, _0016.ORDER))
    op.execute("DROP TABLE typo_words")


def _distance(a: str, b: str) -> str:
    """SQL for Levenshtein's distance of `a` and `b`, but two neighbouring letters swapped are
    one edit, not two ("uesd", "used"). Inline: a SQL function holding a subquery is not
    inlined, and its call cost more than the rest of a correction."""
    return f"""CASE
        WHEN char_length({a}) = char_length({b}) AND levenshtein({a}, {b}) = 2 AND EXISTS (
            SELECT FROM generate_series(1, char_length({a}) - 1) AS i
            WHERE overlay({a} PLACING substr({a}, i + 1, 1) || substr({a}, i, 1) FROM i FOR 2)
                  = {b}
        ) THEN 1
        ELSE levenshtein({a}, {b})
    END"""  # noqa: S608


SUSPECTS = rf"""
        WITH expanded AS MATERIALIZED (
            SELECT e.lexeme, e.qtf, e.grp, e.alt
            FROM query_expanded(collection, config, query) AS e
        ), typed AS MATERIALIZED (  -- read only when a word is unknown
            SELECT DISTINCT w.token, m.lexeme
            FROM regexp_split_to_table(lower(query), '[^[:alpha:]]+') AS w (token)
            CROSS JOIN LATERAL unnest(tsvector_to_array(to_tsvector(config, w.token))) AS m (lexeme)
            WHERE w.token <> ''
        ), unknown AS (  -- plain words of letters the collection does not know, if it corrects
            SELECT x.lexeme, x.qtf,
                   (SELECT min(t.token) FROM typed AS t WHERE t.lexeme = x.lexeme) AS token
            FROM expanded AS x
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
        ), suspects AS MATERIALIZED (  -- long enough, and not typed as a common word
            SELECT u.lexeme, u.qtf, u.token
            FROM unknown AS u
            WHERE greatest(char_length(u.lexeme), char_length(u.token)) >= {MIN_LENGTH}
              AND NOT EXISTS (SELECT FROM typo_words AS g WHERE g.word = u.token)
"""  # noqa: S608


def common_word(columns: str, word: str = "") -> str:
    """The lateral branch that picks suspect `s`'s closest common word (a row at most): its
    `columns` of `n` (`lexeme`, `distance`, and `word` where `word` selects `g.word`)."""
    return rf"""
                (  -- common words one deletion from the typed word on either side, as the
                   -- collection's language analyses them: a lexeme it knows (each looked up by
                   -- key: a join read its whole vocabulary), or none (a stop word, first among
                   -- equals: "witi" is "with", not "citi")
                    SELECT {columns}
                    FROM (
                        SELECT m.lexeme,{word}
                               (SELECT t.df FROM bm25_terms AS t
                                WHERE t.collection_id = collection AND t.lexeme = m.lexeme)
                                   AS df,
                               {_distance("g.word", "s.token")} AS distance,
                               1 - similarity(g.word, s.token) AS far
                        FROM typo_words AS g
                        LEFT JOIN LATERAL query_terms(config, g.word) AS m ON true
                        WHERE lexeme_neighbours(0, g.word) && lexeme_neighbours(0, s.token)
                    ) AS n
                    WHERE (n.lexeme IS NULL OR n.df > 0)
                      AND n.distance <= 1 + char_length(s.token) / {LETTERS_PER_EDIT}
                    ORDER BY n.distance, n.lexeme IS NOT NULL, n.df DESC, n.far, n.lexeme
                    LIMIT 1
                )
"""  # noqa: S608


QUERY_CORRECTED = (
    r"""
    CREATE OR REPLACE FUNCTION query_corrected(collection bigint, config regconfig, query text)
    RETURNS TABLE (lexeme text, qtf integer, grp integer, alt integer,
                   factor double precision, corrects text)
    LANGUAGE sql STABLE PARALLEL SAFE AS $$
"""  # noqa: S608
    + SUSPECTS
    + r"""
        ), closest AS (
            SELECT DISTINCT ON (v.lexeme) v.lexeme, s.qtf, s.lexeme AS corrects
            FROM suspects AS s
            CROSS JOIN LATERAL (
"""
    + common_word("n.lexeme, n.distance")
    + rf"""
                UNION ALL
                (  -- else the collection's lexemes one deletion from the unknown lexeme (the GIN
                   -- index alone: `+ 0` keeps the collection check out of the primary key)
                    SELECT n.lexeme, n.distance
                    FROM (
                        SELECT t.lexeme, t.df, {_distance("t.lexeme", "s.lexeme")} AS distance,
                               1 - similarity(t.lexeme, s.lexeme) AS far
                        FROM bm25_terms AS t
                        WHERE char_length(s.lexeme) >= {MIN_LENGTH}
                          AND lexeme_neighbours(t.collection_id, t.lexeme)
                              && lexeme_neighbours(collection, s.lexeme)
                          AND t.collection_id + 0 = collection
                          AND t.df > 0
                          AND char_length(t.lexeme) >= {MIN_NEIGHBOUR_LENGTH}
                    ) AS n
                    WHERE n.distance <= 1 + char_length(s.lexeme) / {LETTERS_PER_EDIT}
                    ORDER BY n.distance, n.df DESC, n.far, n.lexeme
                    LIMIT 1
                )
                LIMIT 1  -- the second is read only when the first finds nothing
            ) AS v
            WHERE v.lexeme IS NOT NULL  -- a stop word mistyped: nothing to search
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
