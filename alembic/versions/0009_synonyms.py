"""Synonyms per collection, applied when a query is analysed: no re-index.

- `synonym_rules`: a collection's rules as written, in order. An equivalence `CRV, CR-V` makes
  every term stand for the others; a one-way rule `angsuran => cicilan` makes a query for the
  left side also look for the right, and leaves a query for the right unchanged.
- `synonym_terms`: each term of each rule as every text-search configuration of the server
  analyses it (`query_terms`: the query's own analysis, stop words dropped), computed when the
  rules are saved, so a query compares lexemes with lexemes and a rule works whatever the
  language of a chunk. `source`: a query holding the term fires the rule; `target`: a fired
  rule adds the term.
- `query_expanded(collection, config, text)`: the query's lexemes (`query_terms`) plus those
  its fired rules add. A rule fires when the query holds every lexeme of one of its source
  terms. Each fired rule is a group (`grp`, the rule's position) of alternatives: `alt` 0 is
  the matched term (the query's own lexemes), `alt` n the rule's term n - 1. Keyword search
  scores a group as its best alternative in a chunk, so a chunk saying both "CR-V" and "CRV"
  is not counted twice. Each lexeme appears once: a query word is never moved into another
  group's alternatives, and a lexeme two fired rules add belongs to the first rule. An added
  lexeme weighs as if the query said it as often as the matched term. Lexemes outside any
  fired rule have `grp` NULL: with no rule, the rows are `query_terms`' exactly.

Revision ID: 0009
Revises: 0008
"""

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE synonym_rules (
            collection_id bigint  NOT NULL REFERENCES collections (id) ON DELETE CASCADE,
            position      integer NOT NULL CHECK (position >= 0),
            rule          text    NOT NULL,
            PRIMARY KEY (collection_id, position)
        )
        """
    )
    op.execute(
        """
        CREATE TABLE synonym_terms (
            collection_id bigint    NOT NULL,
            position      integer   NOT NULL,
            term          integer   NOT NULL CHECK (term >= 0),
            source        boolean   NOT NULL,
            target        boolean   NOT NULL,
            language      regconfig NOT NULL,
            lexemes       text[]    NOT NULL CHECK (cardinality(lexemes) > 0),
            PRIMARY KEY (collection_id, language, position, term),
            FOREIGN KEY (collection_id, position)
                REFERENCES synonym_rules (collection_id, position) ON DELETE CASCADE
        )
        """
    )
    op.execute(
        """
        CREATE FUNCTION query_expanded(collection bigint, config regconfig, query text)
        RETURNS TABLE (lexeme text, qtf integer, grp integer, alt integer)
        LANGUAGE sql STABLE PARALLEL SAFE AS $$
            WITH words AS MATERIALIZED (
                SELECT w.lexeme, w.qtf FROM query_terms(config, query) AS w
            ), fired AS (  -- per rule, its longest source term the query holds whole
                SELECT DISTINCT ON (t.position) t.position, t.term, t.lexemes,
                       (SELECT min(w.qtf) FROM words AS w WHERE w.lexeme = ANY (t.lexemes))
                           AS qtf
                FROM synonym_terms AS t
                WHERE t.collection_id = collection AND t.language = config AND t.source
                  AND t.lexemes <@ ARRAY(SELECT w.lexeme FROM words AS w)
                ORDER BY t.position, cardinality(t.lexemes) DESC, t.term
            ), alternatives AS (
                SELECT f.position AS grp, 0 AS alt, w.lexeme, w.qtf
                FROM fired AS f JOIN words AS w ON w.lexeme = ANY (f.lexemes)
                UNION ALL
                SELECT f.position, t.term + 1, l.lexeme, f.qtf
                FROM fired AS f
                JOIN synonym_terms AS t
                  ON t.collection_id = collection AND t.language = config
                 AND t.position = f.position AND t.target AND t.term <> f.term
                CROSS JOIN LATERAL unnest(t.lexemes) AS l (lexeme)
                WHERE NOT EXISTS (SELECT FROM words AS w WHERE w.lexeme = l.lexeme)
            ), placed AS (
                SELECT DISTINCT ON (a.lexeme) a.lexeme, a.qtf, a.grp, a.alt
                FROM alternatives AS a
                ORDER BY a.lexeme, a.grp, a.alt
            )
            SELECT w.lexeme, w.qtf, NULL::integer, NULL::integer
            FROM words AS w
            WHERE NOT EXISTS (SELECT FROM placed AS p WHERE p.lexeme = w.lexeme)
            UNION ALL
            SELECT p.lexeme, p.qtf, p.grp, p.alt FROM placed AS p
        $$
        """
    )


def downgrade() -> None:
    op.execute("DROP FUNCTION query_expanded(bigint, regconfig, text)")
    op.execute("DROP TABLE synonym_terms, synonym_rules")
