-- Keyword candidates: full-text match on the GIN index, ranked by ts_rank_cd (title words
-- weigh more through the tsvector's A/B weights). websearch_to_tsquery accepts any user text
-- without syntax errors. {filters} is a fragment compiled by cari.search.filters (parameterized).
SELECT c.id, ts_rank_cd(c.tsv, q.query) AS score
FROM websearch_to_tsquery(%(language)s::oid::regconfig, %(query)s) AS q (query),
     chunks AS c
WHERE c.collection_id = %(collection_id)s
  AND c.tsv @@ q.query
  {filters}
ORDER BY score DESC, c.id
LIMIT %(candidates)s;
