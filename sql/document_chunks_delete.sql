-- Remove a document's chunks before its new ones are copied in (same transaction).
DELETE FROM chunks WHERE document_id = %(document_id)s;
