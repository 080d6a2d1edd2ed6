-- The text and provenance of result chunks, and each one's highlight: the passage of its
-- content around the query's words, found by `ts_headline` in the chunk's own language with
-- the lexemes keyword search looked for there (query_lexemes.sql: synonyms and corrections
-- included; `languages` and `lexemes` pair them), matches between two private-use markers
-- (cari.search.highlights marks them and escapes the rest).
-- `ts_headline` parses the whole content, so it runs on these result rows alone. The markers
-- are removed from the content first, so only ts_headline's are in the passage; a query with
-- no lexeme searches for a marker, which the content no longer holds: no match gives the
-- start of the content. A chunk of at most `max_words` words is its own passage (`whole`).
SELECT c.id, d.external_id AS document_id, d.source, c.title, c.content, c.metadata, c.ordinal,
       ts_headline(c.language, translate(c.content, %(start)s || %(stop)s, '  '),
                   coalesce(q.words, quote_literal(%(start)s)::tsquery),
                   CASE WHEN cardinality(regexp_split_to_array(btrim(c.content), '\s+'))
                             <= %(max_words)s
                        THEN %(whole)s ELSE %(options)s END)
           AS highlight
FROM chunks AS c
JOIN documents AS d ON d.id = c.document_id
CROSS JOIN LATERAL (  -- the lexemes as a tsquery: each quoted ('' and \\ escaped), OR'ed
    SELECT string_agg(
               '''' || replace(replace(w.lexeme, '\', '\\'), '''', '''''') || '''', ' | '
           )::tsquery AS words
    FROM unnest(%(languages)s::oid[], %(lexemes)s::text[]) AS w(language, lexeme)
    WHERE w.language = c.language::oid
) AS q
WHERE c.id = ANY(%(ids)s);
