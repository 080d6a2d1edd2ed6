-- What a search needs to know about its collection (embedder NULL: the default one;
-- search_threshold NULL: searches do not cut, answers apply `threshold`; ef_search NULL: the
-- server's CARI_HNSW_EF_SEARCH; typo_weight 0: no
-- typo is corrected, nor a question respelled for its vector). Its
-- relevance scale: the one set for it, and the one fitted to it (cari.search.fit) if fitted
-- for the embedder it names now.
SELECT id, search_mode, fusion, vector_weight, keyword_weight, rrf_k, top_k, threshold, search_threshold,
       pricing_keywords, financing_keywords, embedder, typo_weight, ef_search,
       relevance_cosine_floor, relevance_cosine_ceiling,
       CASE WHEN relevance_fit ->> 'embedder' IS NOT DISTINCT FROM embedder
            THEN (relevance_fit ->> 'cosine_floor')::float8 END AS fit_floor,
       CASE WHEN relevance_fit ->> 'embedder' IS NOT DISTINCT FROM embedder
            THEN (relevance_fit ->> 'cosine_ceiling')::float8 END AS fit_ceiling,
       name
FROM collections
WHERE name = %(name)s;
