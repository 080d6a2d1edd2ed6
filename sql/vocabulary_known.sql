-- Which words occur in the collection, in input order: a word is known when one of its
-- lexemes (by the collection's configuration) is in some chunk (document frequency above
-- zero: compacted statistics plus pending deltas) or it matches a catalog item's SKU or name
-- (their tsvector's weight A).
WITH words AS (
    SELECT w.word, w.ordinality, c.language, plainto_tsquery(c.language, w.word) AS query
    FROM collections AS c,
         unnest(%(words)s::text[]) WITH ORDINALITY AS w (word, ordinality)
    WHERE c.id = %(collection_id)s
)
SELECT EXISTS (
           SELECT FROM unnest(to_tsvector(w.language, w.word)) AS x
           WHERE (
               SELECT sum(df) FROM (
                   SELECT df FROM bm25_terms
                   WHERE collection_id = %(collection_id)s AND lexeme = x.lexeme
                   UNION ALL
                   SELECT df FROM bm25_pending_terms
                   WHERE collection_id = %(collection_id)s AND lexeme = x.lexeme
               ) AS s
           ) > 0
       )
       OR numnode(w.query) > 0 AND EXISTS (
           SELECT FROM catalog_items AS ci
           WHERE ci.collection_id = %(collection_id)s
             AND ci.tsv @@ w.query
             AND ts_filter(ci.tsv, '{a}') @@ w.query
       ) AS known
FROM words AS w
ORDER BY w.ordinality;
