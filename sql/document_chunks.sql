-- A document's chunks in order.
SELECT id, ordinal, content, token_count, metadata, embedding IS NOT NULL AS embedded
FROM chunks
WHERE document_id = %(document_id)s
ORDER BY ordinal;
