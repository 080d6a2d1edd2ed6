-- Delete one catalog item by SKU; no row back means there was none.
DELETE FROM catalog_items
WHERE collection_id = %(collection_id)s AND sku = %(sku)s
RETURNING id;
