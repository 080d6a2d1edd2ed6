-- Remove the old chunks of replaced documents before their new ones are copied in (same
-- transaction, so readers see the old chunks or the new ones, never neither).
DELETE FROM chunks WHERE document_id = ANY(%(document_ids)s);
