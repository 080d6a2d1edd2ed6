-- A collection's synonym rules as written, in order.
SELECT rule FROM synonym_rules WHERE collection_id = %(collection_id)s ORDER BY position;
