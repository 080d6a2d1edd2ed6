-- The embedder a collection names, read under a share lock held to the end of the writing
-- transaction: a move to another embedder (collection_switch_finish) cannot commit between the
-- check and the write of vectors made by the old one.
SELECT embedder FROM collections WHERE id = %(collection_id)s FOR SHARE;
