-- Create a collection; fails with unique_violation if the name is taken and
-- undefined_object if the text-search configuration does not exist. `dimensions` is the width
-- of the named embedder's vectors (NULL embedder: the default one).
INSERT INTO collections
    (name, language, search_mode, fusion, vector_weight, keyword_weight, rrf_k, threshold, search_threshold, top_k,
     bm25_k1, bm25_b, bm25_k3, typo_weight, title_boost, pricing_keywords, financing_keywords, no_information,
     embedder, dimensions, ef_search)
VALUES
    (%(name)s, %(language)s::regconfig, %(search_mode)s, %(fusion)s, %(vector_weight)s,
     %(keyword_weight)s, %(rrf_k)s, %(threshold)s, %(search_threshold)s, %(top_k)s,
     %(bm25_k1)s, %(bm25_b)s, %(bm25_k3)s, %(typo_weight)s, %(title_boost)s, %(pricing_keywords)s,
     %(financing_keywords)s, %(no_information)s, %(embedder)s, %(dimensions)s, %(ef_search)s)
RETURNING name, language::text AS language, search_mode, fusion, vector_weight, keyword_weight,
          rrf_k, threshold, search_threshold, top_k, bm25_k1, bm25_b, bm25_k3, typo_weight, title_boost, pricing_keywords,
          financing_keywords, no_information, embedder, dimensions, next_embedder,
          relevance_cosine_floor, relevance_cosine_ceiling, relevance_fit, ef_search,
          created_at, updated_at;
