-- One catalog item by SKU.
SELECT sku, name, variant, price, currency, attributes, created_at, updated_at
FROM catalog_items
WHERE collection_id = %(collection_id)s AND sku = %(sku)s;
