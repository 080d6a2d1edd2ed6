-- The SQL engine chosen where the extension was created: drop it (after bm25_unfold), so that
-- no fold packs postings the SQL statement could not read.
DROP EXTENSION IF EXISTS cari_bm25;
