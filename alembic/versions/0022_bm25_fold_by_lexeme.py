"""`bm25_fold` planned the same however stale the statistics of `bm25_blocks`: lexeme by lexeme.

Revision 0018's fold found each changed lexeme's block ends with `lexeme IN (the changed
lexemes)` over the collection's blocks. Where the table's statistics predate the collection's
blocks (a collection created after the last ANALYZE, beside collections that were analysed:
every new collection until autovacuum analyses the table again), the planner estimated one
block and chose a nested loop that compared every block of the collection with every changed
lexeme: `EXPLAIN (ANALYZE)` of a second fold into a 9,000-chunk copy of the 100k benchmark
collection removed 163,197,931 rows by join filter, 23.6 s of a 25.2 s fold (18,401 blocks,
8,870 lexemes), where the rest took 1.6 s. Growing with blocks times lexemes, it is what made
folds into large collections take minutes.

Now each changed lexeme's block ends are read by its own probe of the primary key (a lateral
subquery, which no estimate turns into a scan of the other lexemes' blocks), into a temporary
table that is analysed, so that the changed postings are joined to it by a hash. And each
queued chunk's postings are counted by the extension's `bm25_tsv_terms`, with the chunk's
lengths summed from the same counts, instead of `unnest(tsv)` and a window over every posting
sorted by chunk (1.85 s against 0.74 s for 784,100 postings). The blocks are the same, posting
for posting (compared by a digest over every block's bounds and unpacked postings); the locks,
the lock timeout and the emptied-collection shortcut are unchanged. With the extension at 1.0
(no `bm25_tsv_terms`; no engine serves from the blocks then) the fold now folds nothing.

Revision ID: 0022
Revises: 0021
"""

from alembic import op

from cari.db.migrations import earlier_revision

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


FOLD_LOCK_TIMEOUT = earlier_revision("0014").FOLD_LOCK_TIMEOUT
# The extension at 1.1 or later, which has `bm25_tsv_terms`: at 1.0 (until Cari updates it) no
# engine serves from the blocks, and the writes' posting rows stay where the SQL statement reads.
DELTA_READ = earlier_revision("0017").DELTA_READ


def upgrade() -> None:
    op.execute(FOLD)


def downgrade() -> None:
    op.execute(earlier_revision("0018").FOLD)


FOLD = f"""
        CREATE OR REPLACE FUNCTION bm25_fold(collection bigint) RETURNS boolean
        LANGUAGE plpgsql AS $$
        BEGIN
            IF NOT {DELTA_READ}
               OR NOT pg_try_advisory_xact_lock(417004, (collection % 2147483647)::integer)
               OR NOT pg_try_advisory_xact_lock_shared(417003, (collection % 2147483647)::integer)
            THEN
                RETURN false;
            END IF;
            SET LOCAL lock_timeout = '{FOLD_LOCK_TIMEOUT}';
            BEGIN
                IF NOT EXISTS (SELECT FROM chunks WHERE collection_id = collection) THEN
                    -- Emptied (cleared): every block's chunks are gone, no need to unpack
                    -- them. Chunks written meanwhile have their postings in the delta.
                    DELETE FROM bm25_blocks WHERE collection_id = collection;
                    DELETE FROM bm25_dead WHERE collection_id = collection;
                    RETURN true;
                END IF;
                CREATE TEMP TABLE bm25_fold_moved ON COMMIT DROP AS
                WITH moved AS (
                    DELETE FROM postings WHERE collection_id = collection
                    RETURNING lexeme, chunk_id, tf_title::integer AS tf_title,
                              tf_body::integer AS tf_body, len_title, len_body
                ), queued AS (
                    DELETE FROM bm25_delta WHERE collection_id = collection
                    RETURNING chunk_id
                )
                SELECT * FROM moved
                UNION ALL
                -- each chunk's postings and lengths counted in C, as unnest(tsv) counts them
                SELECT u.lexeme, q.chunk_id, u.tf_title, u.tf_body, l.len_title, l.len_body
                FROM queued AS q
                JOIN chunks AS ch ON ch.id = q.chunk_id
                CROSS JOIN LATERAL (
                    SELECT sum(t.tf_title)::integer AS len_title,
                           sum(t.tf_body)::integer AS len_body
                    FROM bm25_tsv_terms(ch.tsv) AS t
                ) AS l
                CROSS JOIN LATERAL bm25_tsv_terms(ch.tsv) AS u;
                CREATE TEMP TABLE bm25_fold_gone ON COMMIT DROP AS
                WITH gone AS (
                    DELETE FROM bm25_dead WHERE collection_id = collection
                    RETURNING chunk_id, lexemes
                )
                SELECT l.lexeme, g.chunk_id FROM gone AS g, unnest(g.lexemes) AS l (lexeme);
                -- The block ends of each changed lexeme, looked up lexeme by lexeme in the
                -- primary key whatever the planner believes of the collection's blocks, and
                -- analysed, so that the postings are joined to them by a hash.
                CREATE TEMP TABLE bm25_fold_ends ON COMMIT DROP AS
                SELECT l.lexeme, e.lasts
                FROM (SELECT lexeme FROM bm25_fold_moved
                      UNION
                      SELECT lexeme FROM bm25_fold_gone) AS l
                CROSS JOIN LATERAL (
                    SELECT array_agg(b.last_chunk ORDER BY b.last_chunk) AS lasts
                    FROM bm25_blocks AS b
                    WHERE b.collection_id = collection AND b.lexeme = l.lexeme
                ) AS e
                WHERE e.lasts IS NOT NULL;
                ANALYZE bm25_fold_ends;
                -- Each changed posting's block: the first of its lexeme's blocks ending at
                -- or after its chunk; past the last (appends), the last; NULL when the
                -- lexeme has none. A binary search (width_bucket) in the lexeme's sorted
                -- block ends, each posting placed once: new postings carry their place into
                -- the packing, dead ones only mark it.
                CREATE TEMP TABLE bm25_fold_placed ON COMMIT DROP AS
                WITH changed AS (
                    SELECT lexeme, chunk_id, tf_title, tf_body, len_title, len_body, false AS gone
                    FROM bm25_fold_moved
                    UNION ALL
                    SELECT lexeme, chunk_id, NULL, NULL, NULL, NULL, true
                    FROM bm25_fold_gone
                )
                SELECT c.lexeme, c.chunk_id, c.tf_title, c.tf_body, c.len_title, c.len_body, c.gone,
                       coalesce(e.lasts[width_bucket(c.chunk_id - 1, e.lasts) + 1],
                                e.lasts[cardinality(e.lasts)]) AS home
                FROM changed AS c LEFT JOIN bm25_fold_ends AS e USING (lexeme);
                CREATE TEMP TABLE bm25_fold_old ON COMMIT DROP AS
                WITH rewritten AS (
                    DELETE FROM bm25_blocks AS b
                    USING (SELECT DISTINCT lexeme, home FROM bm25_fold_placed
                           WHERE home IS NOT NULL) AS h
                    WHERE b.collection_id = collection AND b.lexeme = h.lexeme
                      AND b.last_chunk = h.home
                    RETURNING b.lexeme, b.last_chunk, b.data
                )
                SELECT r.lexeme, r.last_chunk AS home, u.chunk_id, u.tf_title, u.tf_body,
                       u.len_title, u.len_body
                FROM rewritten AS r CROSS JOIN LATERAL bm25_unpack(r.data) AS u;
                -- Grouped by the lexeme's bytes: equality is the same in every deterministic
                -- collation, and one sort of the postings in "C" takes half the time of the
                -- database's collation (abbreviated keys, memcmp).
                INSERT INTO bm25_blocks (collection_id, lexeme, last_chunk, n, data)
                SELECT collection, g.lexeme, p.last_chunk, p.n, p.data
                FROM (
                    SELECT x.lexeme COLLATE "C" AS lexeme, x.home,
                           array_agg(x.chunk_id ORDER BY x.chunk_id) AS ids,
                           array_agg(x.tf_title ORDER BY x.chunk_id) AS tf_title,
                           array_agg(x.tf_body ORDER BY x.chunk_id) AS tf_body,
                           array_agg(x.len_title ORDER BY x.chunk_id) AS len_title,
                           array_agg(x.len_body ORDER BY x.chunk_id) AS len_body
                    FROM (
                        SELECT o.lexeme, o.home, o.chunk_id, o.tf_title, o.tf_body, o.len_title,
                               o.len_body
                        FROM bm25_fold_old AS o
                        WHERE NOT EXISTS (SELECT FROM bm25_fold_gone AS d
                                          WHERE d.lexeme = o.lexeme AND d.chunk_id = o.chunk_id)
                        UNION ALL
                        SELECT m.lexeme, m.home, m.chunk_id, m.tf_title, m.tf_body, m.len_title,
                               m.len_body
                        FROM bm25_fold_placed AS m
                        WHERE NOT m.gone
                    ) AS x
                    GROUP BY x.lexeme COLLATE "C", x.home
                ) AS g
                CROSS JOIN LATERAL bm25_pack(g.ids, g.tf_title, g.tf_body, g.len_title,
                                             g.len_body) AS p;
                DROP TABLE bm25_fold_moved, bm25_fold_gone, bm25_fold_ends, bm25_fold_placed,
                           bm25_fold_old;
            EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
                RETURN false;  -- a writer holds the delta's rows: fold another time
            END;
            RETURN true;
        END
        $$
        """  # noqa: S608
