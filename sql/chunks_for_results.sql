-- The text and provenance of result chunks.
SELECT c.id, d.external_id AS document_id, c.title, c.content, c.metadata, c.ordinal
FROM chunks AS c
JOIN documents AS d ON d.id = c.document_id
WHERE c.id = ANY(%(ids)s);
