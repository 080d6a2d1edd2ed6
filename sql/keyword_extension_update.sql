-- Bring Cari's keyword extension in this database to the server's version (its update scripts).
ALTER EXTENSION cari_bm25 UPDATE;
