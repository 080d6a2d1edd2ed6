-- Has Alembic ever run here? (true when its bookkeeping table exists)
SELECT to_regclass('alembic_version') IS NOT NULL;
