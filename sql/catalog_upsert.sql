-- Insert or update a batch of catalog items by SKU, with their embeddings; `language` is the
-- collection's, which the generated tsvector analyses with. `created` tells the two apart.
INSERT INTO catalog_items
    (collection_id, sku, name, variant, price, currency, attributes, language, embedding)
SELECT %(collection_id)s, i.sku, i.name, i.variant, i.price, i.currency, i.attributes,
       (SELECT language FROM collections WHERE id = %(collection_id)s), i.embedding
FROM unnest(%(skus)s::text[], %(names)s::text[], %(variants)s::text[], %(prices)s::numeric[],
            %(currencies)s::text[], %(attributes)s::jsonb[], %(embeddings)s::vector[])
     AS i (sku, name, variant, price, currency, attributes, embedding)
ON CONFLICT (collection_id, sku) DO UPDATE
SET name       = EXCLUDED.name,
    variant    = EXCLUDED.variant,
    price      = EXCLUDED.price,
    currency   = EXCLUDED.currency,
    attributes = EXCLUDED.attributes,
    language   = EXCLUDED.language,
    embedding  = EXCLUDED.embedding,
    next_embedding = NULL,  -- a move to another embedder embeds the new text again
    updated_at = now()
RETURNING sku, (xmax = 0) AS created;
