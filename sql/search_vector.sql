-- Vector candidates: cosine distance over the HNSW index of the collection's width; score is the
-- cosine similarity. ef_search is read back inside the transaction so the response can show
-- what was applied. {indexed} (`c.embedding::vector(384)`, ...), {type} and {dimension} are
-- the width's (cari.vector_space: the index is used only with this very expression and a
-- constant width); {filters} is a fragment compiled by cari.search.filters (parameterized).
SELECT c.id, 1 - ({indexed} <=> %(vector)s::{type}) AS score,
       current_setting('hnsw.ef_search') AS ef
FROM chunks AS c
WHERE c.collection_id = %(collection_id)s
  AND vector_dims(c.embedding) = {dimension}
  {filters}
ORDER BY {indexed} <=> %(vector)s::{type}
LIMIT %(candidates)s;
