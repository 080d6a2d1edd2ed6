-- cari_bm25 1.0 -> 1.1: the postings of an unfolded chunk, read from its tsvector.
\echo Use "ALTER EXTENSION cari_bm25 UPDATE TO '1.1'" to load this file. \quit

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
