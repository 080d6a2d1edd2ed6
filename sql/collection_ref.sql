-- A collection's id, text-search configuration (as an oid, the form binary COPY sends), the
-- embedder it names (NULL: the default one) and the one a re-embedding moves it to.
SELECT id, language::oid AS language, embedder, next_embedder
FROM collections WHERE name = %(name)s;
