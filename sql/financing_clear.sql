-- Delete every financing rate of a collection.
DELETE FROM financing_rates WHERE collection_id = %(collection_id)s;
