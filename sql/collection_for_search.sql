-- What a search needs to know about its collection (embedder NULL: the default one).
SELECT id, search_mode, fusion, vector_weight, keyword_weight, rrf_k, top_k, threshold,
       pricing_keywords, financing_keywords, embedder
FROM collections
WHERE name = %(name)s;
