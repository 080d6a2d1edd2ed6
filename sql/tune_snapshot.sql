-- The first statement of a tuning's transaction: every question and every ef_search is
-- measured on one snapshot, so rows written meanwhile cannot pass for lost recall.
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY;
