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

from cari.db.migrations import earlier_revision, edited

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


_0018 = earlier_revision("0018")
# The extension at 1.1 or later, which has `bm25_tsv_terms`: at 1.0 (until Cari updates it) no
# engine serves from the blocks, and the writes' posting rows stay where the SQL statement reads.
DELTA_READ = earlier_revision("0017").DELTA_READ


def upgrade() -> None:
    op.execute(FOLD)


def downgrade() -> None:
    op.execute(_0018.FOLD)


# Revision 0018's function, changed where the docstring says; the rest is as it was.
FOLD = edited(
    _0018.FOLD,
    (
        """
            IF NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'cari_bm25')
""",
        f"""
            IF NOT {DELTA_READ}
""",
    ),
    (
        """
                ), terms AS MATERIALIZED (
                    SELECT q.chunk_id, u.lexeme,
                           cardinality(array_positions(u.weights, 'A')) AS tf_title,
                           cardinality(u.weights)
                               - cardinality(array_positions(u.weights, 'A')) AS tf_body
                    FROM queued AS q
                    JOIN chunks AS ch ON ch.id = q.chunk_id
                    CROSS JOIN LATERAL unnest(ch.tsv) AS u
                )
                SELECT * FROM moved
                UNION ALL
                SELECT t.lexeme, t.chunk_id, t.tf_title, t.tf_body,
                       (sum(t.tf_title) OVER w)::integer, (sum(t.tf_body) OVER w)::integer
                FROM terms AS t
                WINDOW w AS (PARTITION BY t.chunk_id);
""",
        """
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
""",
    ),
    (
        """
                SELECT l.lexeme, g.chunk_id FROM gone AS g, unnest(g.lexemes) AS l (lexeme);
""",
        """
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
""",
    ),
    (
        """
                WITH ends AS (
                    SELECT b.lexeme, array_agg(b.last_chunk ORDER BY b.last_chunk) AS lasts
                    FROM bm25_blocks AS b
                    WHERE b.collection_id = collection
                      AND b.lexeme IN (SELECT lexeme FROM bm25_fold_moved
                                       UNION ALL
                                       SELECT lexeme FROM bm25_fold_gone)
                    GROUP BY b.lexeme
                ), changed AS (
""",
        """
                WITH changed AS (
""",
    ),
    ("LEFT JOIN ends AS e USING (lexeme);", "LEFT JOIN bm25_fold_ends AS e USING (lexeme);"),
    (
        """
                DROP TABLE bm25_fold_moved, bm25_fold_gone, bm25_fold_placed, bm25_fold_old;
""",
        """
                DROP TABLE bm25_fold_moved, bm25_fold_gone, bm25_fold_ends, bm25_fold_placed,
                           bm25_fold_old;
""",
    ),
)
