-- A page of a collection's catalog items in SKU order.
SELECT sku, name, variant, price, currency, attributes, created_at, updated_at
FROM catalog_items
WHERE collection_id = %(collection_id)s
ORDER BY sku
LIMIT %(limit)s OFFSET %(offset)s;
