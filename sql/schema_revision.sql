-- The schema revision the database is at.
SELECT version_num FROM alembic_version;
