-- The rows of a collection's packed blocks that a reader cannot trust, each named with what is
-- wrong (migration 0025; `lexemes` NULL: every lexeme). One row at a time, a payload that does
-- not decode caught alone, so one damaged row hides no other.
SELECT lexeme, last_chunk, problem
FROM bm25_block_problems(%(collection_id)s, %(lexemes)s::text[]);
