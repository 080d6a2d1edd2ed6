-- Absolute relevance evidence for fused chunks (cari.search.relevance): the cosine similarity
-- of each chunk to the query vector (NULL without one); the query's term coverage, the share
-- of the query's lexemes (each weighted by its BM25 idf and, as keyword search weighs it, by how
-- often the query says it: `bm25_k3`) that the chunk holds; and the specificity of what it
-- holds: the held lexemes' idf counted over the chunks other than one holding each (`rarity`:
-- a word only this chunk holds weighs as a word of no chunk) less ln(N), so that words most
-- chunks hold score below 0, a word one chunk holds ln 2. The query's lexemes in each
-- language of the collection are parameters, as keyword search read them (query_lexemes.sql:
-- stop words dropped), and a chunk is measured in its own: an English document in an
-- Indonesian collection is matched on English stems. A query word the
-- collection has never seen weighs as a word of no chunk (df 0), more than any it holds: a
-- question about something else covers little of itself here. Each chunk reads its embedding
-- and its tsvector by primary key: the 2·top_k weighed chunks, no scan. A fired synonym rule
-- (`query_expanded`, migration 0009) weighs what its matched term weighs, and a chunk covers
-- the share of it that the chunk's best alternative covers: "cicilan" covers "angsuran". A
-- chunk whose vector is another width than the query's (its collection was just moved to
-- another embedder) has no cosine, rather than an error. Each lexeme is looked up in a chunk's
-- tsvector as a one-lexeme tsquery (`probe`, quoted as chunks_for_results quotes them), a binary
-- search in the sorted tsvector: `lexeme = ANY (tsvector_to_array(tsv))` built the array once per
-- chunk and lexeme: two fifths of the statement's time at 20 chunks and 15 lexemes. The probes
-- read the chunk's lexemes once (`lexemes`): a tsvector of a chunk is most often stored out of
-- line (TOAST), and each `@@` on the column fetched it again, a third of the statement's time.
-- `strip` keeps the lexemes alone, all a one-lexeme probe matches on; OFFSET 0 keeps it from
-- being inlined into each probe.
WITH total AS (
    SELECT coalesce(sum(chunks), 0) AS n FROM (
        SELECT chunks FROM bm25_sizes WHERE collection_id = %(collection_id)s
        UNION ALL
        SELECT chunks FROM bm25_pending_sizes WHERE collection_id = %(collection_id)s
    ) AS s
), terms AS MATERIALIZED (  -- once per query, not once per chunk
    SELECT w.language::regconfig AS language, w.lexeme, w.grp, w.alt,
           ln(1 + (t.n - d.df + 0.5) / (d.df + 0.5)) * bm25_query_weight(w.qtf, k.bm25_k3)
               * w.factor AS weight,
           -- the same weight of the chunks other than one holding the word (`specificity`)
           ln(1 + (t.n - greatest(d.df, 1) + 1.5) / (greatest(d.df, 1) - 0.5))
               * bm25_query_weight(w.qtf, k.bm25_k3) * w.factor AS rarity,
           ('''' || replace(replace(w.lexeme, '\', '\\'), '''', '''''') || '''')::tsquery
               AS probe
    FROM unnest(%(languages)s::oid[], %(lexemes)s::text[], %(qtfs)s::integer[],
                %(groups)s::integer[], %(alts)s::integer[], %(factors)s::double precision[])
         AS w(language, lexeme, qtf, grp, alt, factor)
    CROSS JOIN total AS t
    CROSS JOIN collections AS k
    CROSS JOIN LATERAL (
        SELECT coalesce(sum(df), 0) AS df FROM (
            SELECT df FROM bm25_terms
            WHERE collection_id = %(collection_id)s AND lexeme = w.lexeme
            UNION ALL
            SELECT df FROM bm25_pending_terms
            WHERE collection_id = %(collection_id)s AND lexeme = w.lexeme
        ) AS s
    ) AS d
    WHERE k.id = %(collection_id)s
)
SELECT c.id,
       CASE WHEN vector_dims(c.embedding) = vector_dims(%(vector)s::vector)
            THEN 1 - (c.embedding <=> %(vector)s::vector) END AS cosine,
       h.coverage,
       h.rarity - ln(greatest(total.n, 1)) AS specificity
FROM chunks AS c
CROSS JOIN total
CROSS JOIN LATERAL (SELECT strip(c.tsv) AS lexemes OFFSET 0) AS x
CROSS JOIN LATERAL (
           SELECT coalesce(sum(u.own * u.share) / nullif(sum(u.own), 0), 0) AS coverage,
                  coalesce(sum(u.rarity), 0) AS rarity
           FROM (  -- a lexeme, or a fired rule: what the query's own term weighs, best share
               SELECT sum(a.total) FILTER (WHERE a.alt = 0) AS own,
                      max(a.held / a.total) AS share, max(a.rarity) AS rarity
               FROM (
                   SELECT coalesce(t.grp::text, t.lexeme) AS unit, coalesce(t.alt, 0) AS alt,
                          sum(t.weight) AS total,
                          coalesce(sum(t.weight) FILTER (
                              WHERE x.lexemes @@ t.probe), 0) AS held,
                          coalesce(sum(t.rarity) FILTER (
                              WHERE x.lexemes @@ t.probe), 0) AS rarity
                   FROM terms AS t
                   WHERE t.language = c.language
                   GROUP BY 1, 2
               ) AS a
               GROUP BY a.unit
           ) AS u
) AS h
WHERE c.id = ANY (%(ids)s);
