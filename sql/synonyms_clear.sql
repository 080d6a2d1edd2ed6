-- Remove a collection's synonym rules (their analysed terms go with them: ON DELETE CASCADE).
DELETE FROM synonym_rules WHERE collection_id = %(collection_id)s;
