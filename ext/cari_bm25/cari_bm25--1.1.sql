-- cari_bm25 1.1: the functions of Cari's BM25 blocks (the tables are Cari's migrations').
\echo Use "CREATE EXTENSION cari_bm25" to load this file. \quit

-- The postings of one lexeme, ascending by chunk id, packed as consecutive block rows of at
-- most 1024 postings and 1800 bytes each.
CREATE FUNCTION bm25_pack(chunk_ids bigint[], tf_title int4[], tf_body int4[],
                          len_title int4[], len_body int4[])
RETURNS TABLE (last_chunk bigint, n int4, data bytea)
AS 'MODULE_PATHNAME', 'bm25_pack'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- The postings of one block payload, validated completely.
CREATE FUNCTION bm25_unpack(data bytea)
RETURNS TABLE (chunk_id bigint, tf_title int4, tf_body int4, len_title int4, len_body int4)
AS 'MODULE_PATHNAME', 'bm25_unpack'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- The exact BM25 top k of one collection over the bm25_blocks table of the search path, in
-- the statement's snapshot: score DESC, chunk_id ASC, scores > 0 only. allowed NULL: no
-- filter; dead NULL or empty: none. cari_bm25.pruning = off sums every posting (tests).
CREATE FUNCTION bm25_topk(collection_id bigint, lexemes text[], groups int4[], alts int4[],
                          weights float8[], avglen float8, k1 float8, b float8,
                          boost float8, k int4, allowed bigint[], dead bigint[])
RETURNS TABLE (chunk_id bigint, score float8)
AS 'MODULE_PATHNAME', 'bm25_topk'
LANGUAGE C STABLE PARALLEL SAFE ROWS 100;

-- For each of the lexemes the tsvector holds: its count in the title (weight A) and in the
-- body (other weights), and the chunk's title and body lengths, as unnest(tsv) counts them.
CREATE FUNCTION bm25_tsv_postings(tsv tsvector, lexemes text[])
RETURNS TABLE (lexeme text, tf_title int4, tf_body int4, len_title int4, len_body int4)
AS 'MODULE_PATHNAME', 'bm25_tsv_postings'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE ROWS 4;
-- Every lexeme of the tsvector with its counts in the title and in the body (a write's
-- document frequencies and lengths), as unnest(tsv) counts them.
CREATE FUNCTION bm25_tsv_terms(tsv tsvector)
RETURNS TABLE (lexeme text, tf_title int4, tf_body int4)
AS 'MODULE_PATHNAME', 'bm25_tsv_terms'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE ROWS 60;
