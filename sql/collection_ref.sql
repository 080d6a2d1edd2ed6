-- A collection's id and text-search configuration (as an oid, the form binary COPY sends).
SELECT id, language::oid AS language FROM collections WHERE name = %(name)s;
