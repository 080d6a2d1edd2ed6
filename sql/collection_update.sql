-- Change the given settings of a collection (NULL parameters keep the current value, but
-- no_information changes whenever no_information_set is true, to NULL too, search_threshold
-- whenever search_threshold_set is, ef_search whenever ef_search_set is, and the relevance
-- scale set for the collection whenever relevance_scale_set is).
-- A new language re-indexes the text that used the old one: the tsvector columns are
-- generated from `language`, so updating it recomputes them in this same statement (and their
-- triggers re-index the BM25 postings). k1, b, k3, the typo weight and the title boost apply
-- at query time.
WITH old AS (
    SELECT id, language FROM collections WHERE name = %(name)s FOR UPDATE
), updated AS (
    UPDATE collections AS c
    SET language       = coalesce(%(language)s::regconfig, c.language),
        search_mode    = coalesce(%(search_mode)s, c.search_mode),
        fusion         = coalesce(%(fusion)s, c.fusion),
        vector_weight  = coalesce(%(vector_weight)s, c.vector_weight),
        keyword_weight = coalesce(%(keyword_weight)s, c.keyword_weight),
        rrf_k          = coalesce(%(rrf_k)s, c.rrf_k),
        threshold      = coalesce(%(threshold)s, c.threshold),
        search_threshold   = CASE WHEN %(search_threshold_set)s THEN %(search_threshold)s
                                  ELSE c.search_threshold END,
        ef_search          = CASE WHEN %(ef_search_set)s THEN %(ef_search)s
                                  ELSE c.ef_search END,
        top_k          = coalesce(%(top_k)s, c.top_k),
        bm25_k1        = coalesce(%(bm25_k1)s, c.bm25_k1),
        bm25_b         = coalesce(%(bm25_b)s, c.bm25_b),
        bm25_k3        = coalesce(%(bm25_k3)s, c.bm25_k3),
        typo_weight    = coalesce(%(typo_weight)s, c.typo_weight),
        title_boost    = coalesce(%(title_boost)s, c.title_boost),
        pricing_keywords   = coalesce(%(pricing_keywords)s, c.pricing_keywords),
        financing_keywords = coalesce(%(financing_keywords)s, c.financing_keywords),
        no_information     = CASE WHEN %(no_information_set)s THEN %(no_information)s
                                  ELSE c.no_information END,
        relevance_cosine_floor   = CASE WHEN %(relevance_scale_set)s
                                        THEN %(relevance_cosine_floor)s
                                        ELSE c.relevance_cosine_floor END,
        relevance_cosine_ceiling = CASE WHEN %(relevance_scale_set)s
                                        THEN %(relevance_cosine_ceiling)s
                                        ELSE c.relevance_cosine_ceiling END,
        updated_at     = now()
    FROM old
    WHERE c.id = old.id
    RETURNING c.*, old.language AS old_language
), relanguage_chunks AS (
    UPDATE chunks AS ch
    SET language = u.language
    FROM updated AS u
    WHERE ch.collection_id = u.id AND ch.language = u.old_language AND u.language <> u.old_language
), relanguage_catalog AS (
    UPDATE catalog_items AS ci
    SET language = u.language
    FROM updated AS u
    WHERE ci.collection_id = u.id AND ci.language = u.old_language AND u.language <> u.old_language
)
SELECT name, language::text AS language, search_mode, fusion, vector_weight, keyword_weight,
       rrf_k, threshold, search_threshold, top_k, bm25_k1, bm25_b, bm25_k3, typo_weight, title_boost, pricing_keywords,
       financing_keywords, no_information, embedder, dimensions, next_embedder,
       relevance_cosine_floor, relevance_cosine_ceiling, relevance_fit, ef_search,
       created_at, updated_at
FROM updated;
