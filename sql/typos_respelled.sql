-- The question's misspelled words and the common words keyword search reads them as, in the
-- collection's language (`query_respelled`, migration 0021): the vector side embeds the
-- question with them in place. Nothing when the collection corrects no typos.
SELECT r.typed, r.word
FROM collections AS c
CROSS JOIN LATERAL query_respelled(c.id, c.language, %(query)s) AS r
WHERE c.id = %(collection_id)s;
