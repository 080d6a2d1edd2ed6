-- Whether word pairs joined by a conjunction ("syarat dan ketentuan") are phrases of the
-- collection: per pair, in input order, how many of at most 100 of its chunks hold both words
-- and how many of those hold the phrase. Text is analysed by the collection's configuration;
-- a word that analyses to nothing (a stop word) has no chunks.
WITH pairs AS (
    SELECT p.ordinality,
           plainto_tsquery(c.language, p.lft) AS lft,
           plainto_tsquery(c.language, p.rgt) AS rgt,
           phraseto_tsquery(c.language, p.phrase) AS phrase
    FROM collections AS c,
         unnest(%(lefts)s::text[], %(rights)s::text[], %(phrases)s::text[])
             WITH ORDINALITY AS p (lft, rgt, phrase, ordinality)
    WHERE c.id = %(collection_id)s
)
SELECT count(s.tsv) AS both, count(s.tsv) FILTER (WHERE s.tsv @@ p.phrase) AS phrase
FROM pairs AS p
LEFT JOIN LATERAL (
    SELECT ch.tsv
    FROM chunks AS ch
    WHERE ch.collection_id = %(collection_id)s AND ch.tsv @@ (p.lft && p.rgt)
    LIMIT 100
) AS s ON numnode(p.lft) > 0 AND numnode(p.rgt) > 0
GROUP BY p.ordinality
ORDER BY p.ordinality;
