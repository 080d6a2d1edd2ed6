-- Insert a batch of documents, replacing changed ones. A document whose stored content hash is
-- the same (someone stored this exact content meanwhile) returns no row: nothing to do. Nor does
-- one the {filters} fragment hides from the writer (another tenant's, alias `c`): it is left as
-- it is, and the caller refuses the write.
INSERT INTO documents AS c (collection_id, external_id, title, source, metadata, content_hash)
SELECT %(collection_id)s, d.external_id, d.title, d.source, d.metadata, d.content_hash
FROM unnest(%(external_ids)s::text[], %(titles)s::text[], %(sources)s::text[],
            %(metadata)s::jsonb[], %(content_hashes)s::text[])
     AS d (external_id, title, source, metadata, content_hash)
ON CONFLICT (collection_id, external_id) DO UPDATE
SET title        = EXCLUDED.title,
    source       = EXCLUDED.source,
    metadata     = EXCLUDED.metadata,
    content_hash = EXCLUDED.content_hash,
    updated_at   = now()
WHERE c.content_hash <> EXCLUDED.content_hash {filters}
RETURNING external_id, id, (xmax = 0) AS created;
