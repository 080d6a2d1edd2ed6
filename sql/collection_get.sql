-- One collection by name.
SELECT name, language::text AS language, search_mode, fusion, vector_weight, keyword_weight,
       rrf_k, threshold, search_threshold, top_k, bm25_k1, bm25_b, bm25_k3, typo_weight, title_boost, pricing_keywords,
       financing_keywords, no_information, embedder, dimensions, next_embedder,
       relevance_cosine_floor, relevance_cosine_ceiling, relevance_fit, ef_search,
       created_at, updated_at
FROM collections
WHERE name = %(name)s;
