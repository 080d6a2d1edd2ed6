-- Bulk load of chunk rows (binary COPY); embedding is NULL when the embedder was down.
COPY chunks (collection_id, document_id, ordinal, title, content, metadata, language,
             token_count, embedding)
FROM STDIN WITH (FORMAT BINARY);
