-- The terms that a query in the collection's language reduces to nothing (stop words,
-- punctuation): a rule holding one could never fire.
SELECT t.term
FROM unnest(%(terms)s::text[]) AS t (term)
WHERE NOT EXISTS (SELECT FROM query_terms(%(language)s::regconfig, t.term));
