-- Does a database of this name exist on the server?
SELECT 1 FROM pg_database WHERE datname = %(name)s;
