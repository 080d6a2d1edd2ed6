-- Insert a document or replace a changed one. Returns no row when the stored content hash is
-- the same (someone stored this exact content already): nothing to do.
INSERT INTO documents (collection_id, external_id, title, source, metadata, content_hash)
VALUES (%(collection_id)s, %(external_id)s, %(title)s, %(source)s, %(metadata)s, %(content_hash)s)
ON CONFLICT (collection_id, external_id) DO UPDATE
SET title        = EXCLUDED.title,
    source       = EXCLUDED.source,
    metadata     = EXCLUDED.metadata,
    content_hash = EXCLUDED.content_hash,
    updated_at   = now()
WHERE documents.content_hash <> EXCLUDED.content_hash
RETURNING id, (xmax = 0) AS created;
