-- Create Cari's keyword extension in this database (the server has it: keyword_extension_available).
CREATE EXTENSION IF NOT EXISTS cari_bm25;
