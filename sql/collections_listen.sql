-- Hear the announcements of changes to collections (migration 0012's trigger).
LISTEN cari_collections;
