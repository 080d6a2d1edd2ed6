-- Fragment (not a statement) of search_keyword.sql, search_keyword_blocks.sql and
-- search_keyword_chunks.sql, composed by cari.search.bm25.statement: every posting of the
-- terms, scored and summed per chunk (`scored`), a fired rule's group as its best alternative;
-- its filters as there. `postings` reads a term's postings (`t.lexeme`): its rows in the
-- `postings` table (the SQL statement), those and the chunk delta's (the blocks' statement's
-- CTE `unfolded`), or the chunks' own (the chunks' statement's `unfolded`).
parts AS NOT MATERIALIZED (  -- inlined in each branch below: postings read once
    SELECT heads.chunk_id, heads.grp, heads.alt, heads.part
    FROM (
        SELECT h.chunk_id, t.grp, t.alt,
               t.weight * bm25_tf(h.tf_title * p.boost + h.tf_body,
                               h.len_title * p.boost + h.len_body, a.avglen, p.k1, p.b) AS part
        FROM terms AS t
        CROSS JOIN params AS p
        CROSS JOIN totals AS a
        CROSS JOIN LATERAL ({postings}
        ) AS h
    ) AS heads
    {filters}
), scored AS (
    SELECT s.chunk_id, sum(s.score) AS score
    FROM (
        SELECT chunk_id, part AS score FROM parts WHERE grp IS NULL
        UNION ALL
        SELECT a.chunk_id, max(a.score)  -- a fired rule: its best alternative
        FROM (
            SELECT chunk_id, grp, sum(part) AS score
            FROM parts WHERE grp IS NOT NULL
            GROUP BY chunk_id, grp, alt
        ) AS a
        GROUP BY a.chunk_id, a.grp
    ) AS s
    GROUP BY s.chunk_id
)
