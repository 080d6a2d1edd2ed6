-- A collection's synonym rules and their terms, each term analysed by every text-search
-- configuration as a query is (`query_terms`), so a rule compares lexemes with lexemes
-- whatever the language of the chunks. A term a configuration reduces to nothing is left
-- out for that configuration. `positions`, `terms`, `texts`, `sources` and `targets` list
-- the terms, rule by rule.
WITH rules AS (
    INSERT INTO synonym_rules (collection_id, position, rule)
    SELECT %(collection_id)s, r.ordinality - 1, r.rule
    FROM unnest(%(rules)s::text[]) WITH ORDINALITY AS r (rule, ordinality)
    RETURNING position
)
INSERT INTO synonym_terms (collection_id, position, term, source, target, language, lexemes)
SELECT %(collection_id)s, t.position, t.term, t.source, t.target, c.oid::regconfig, l.lexemes
FROM unnest(%(positions)s::int[], %(terms)s::int[], %(texts)s::text[], %(sources)s::bool[],
            %(targets)s::bool[]) AS t (position, term, text, source, target)
CROSS JOIN pg_ts_config AS c
CROSS JOIN LATERAL (
    SELECT array_agg(w.lexeme ORDER BY w.lexeme) AS lexemes
    FROM query_terms(c.oid::regconfig, t.text) AS w
) AS l
WHERE l.lexemes IS NOT NULL
  AND EXISTS (SELECT FROM rules WHERE rules.position = t.position);
