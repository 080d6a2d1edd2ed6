-- Width of the chunks.embedding column (a vector's typmod is its dimension).
SELECT atttypmod FROM pg_attribute
WHERE attrelid = 'chunks'::regclass AND attname = 'embedding';
