-- Each collection's embedder (NULL: the default one) and the width of its stored vectors.
SELECT name, embedder, dimensions FROM collections ORDER BY name;
