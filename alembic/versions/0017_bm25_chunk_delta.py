"""The keyword delta as one row per chunk: writes no longer insert a row per posting.

With the `cari_bm25` extension a chunk written since the last fold is one row of `bm25_delta
(collection_id, chunk_id)`; its postings are its own tsvector (`chunks.tsv`, the source of
truth), which searches read with the extension's `bm25_tsv_postings` and `bm25_fold` unnests
when it packs them into blocks. A write appends one delta row per chunk instead of ~60 posting
rows and their two index entries each. Without the extension nothing changes: `postings` holds
one row per posting and is the whole index the SQL statement reads.

Both kinds of delta are read and folded, so the engines switch without a conversion: posting
rows written before `CREATE EXTENSION` are folded like chunk rows. Which one a write appends is
decided in the statement that appends it (one snapshot): `postings` where the extension is
absent, `bm25_delta` where it is present. A chunk's postings are still in exactly one place:
the posting rows, the chunk delta, or the blocks (alive unless dead).

Revision ID: 0017
Revises: 0016
"""

from alembic import op

from cari.db.migrations import earlier_revision

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

EXTENSION_PRESENT = "EXISTS (SELECT FROM pg_extension WHERE extname = 'cari_bm25')"
# The extension at a version that reads the chunk delta (1.1 on: `bm25_tsv_postings`): only then
# do writes append to it. At 1.0 (until Cari updates it) writes append posting rows, which every
# version reads; no engine serves from 1.0 (sql/keyword_engine.sql).
DELTA_READ = "EXISTS (SELECT FROM pg_extension WHERE extname = 'cari_bm25' AND extversion <> '1.0')"


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE bm25_delta (
            collection_id bigint NOT NULL,
            chunk_id      bigint NOT NULL,
            PRIMARY KEY (collection_id, chunk_id)
        )
        """
    )
    op.execute(INDEX)
    op.execute(UNINDEX)
    op.execute(STORED_POSTINGS)
    op.execute(FOLD)
    blocks = earlier_revision("0014")
    op.execute(blocks._collections_deleted(blocks=True, extra=("bm25_delta",)))
    op.execute(blocks._rebuild(blocks=True, extra=("bm25_delta",)))


def downgrade() -> None:
    # The chunk delta back into posting rows, as revision 0015 wrote them.
    op.execute(
        """
        INSERT INTO postings (collection_id, lexeme, chunk_id, tf_title, tf_body, len_title,
                              len_body)
        SELECT d.collection_id, t.lexeme, d.chunk_id, t.tf_title, t.tf_body,
               sum(t.tf_title) OVER w, sum(t.tf_body) OVER w
        FROM bm25_delta AS d
        JOIN chunks AS ch ON ch.id = d.chunk_id
        CROSS JOIN LATERAL (
            SELECT u.lexeme, cardinality(array_positions(u.weights, 'A')) AS tf_title,
                   cardinality(u.weights) - cardinality(array_positions(u.weights, 'A'))
                       AS tf_body
            FROM unnest(ch.tsv) AS u
        ) AS t
        WINDOW w AS (PARTITION BY d.chunk_id)
        """
    )
    blocks = earlier_revision("0014")
    op.execute(blocks._collections_deleted(blocks=True))
    op.execute(blocks._rebuild(blocks=True))
    op.execute(blocks._unindex(blocks=True))
    op.execute(blocks.fold_function().replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1))
    op.execute(
        earlier_revision("0002")
        .index_function()
        .replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1)
    )
    op.execute(
        blocks.stored_postings_function().replace(
            "CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1
        )
    )
    op.execute("DROP TABLE bm25_delta")


# A chunk's postings from its tsvector: a position of weight A is a title occurrence, any other a
# body one; its lengths are those counts over every lexeme.
INDEX = f"""
    CREATE OR REPLACE FUNCTION bm25_index(ids bigint[]) RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_advisory_xact_lock_shared(417003, (c % 2147483647)::integer)
        FROM (
            SELECT DISTINCT ch.collection_id
            FROM unnest(ids) AS i (id) JOIN chunks AS ch USING (id)
        ) AS s (c);
        IF {DELTA_READ} THEN
            -- Planned only here, where the extension's functions exist. Its counts in C
            -- (bm25_tsv_terms), one delta row per chunk. Should the extension be dropped
            -- meanwhile (`bm25_unfold` locks bm25_delta first), the statement fails: no write is
            -- left where the SQL statement cannot read it.
            WITH written AS MATERIALIZED (
                SELECT ch.id AS chunk_id, ch.collection_id, ch.language, ch.tsv
                FROM unnest(ids) AS i (id) JOIN chunks AS ch USING (id)
            ), terms AS MATERIALIZED (
                SELECT w.collection_id, w.language, t.lexeme, t.tf_title, t.tf_body
                FROM written AS w CROSS JOIN LATERAL bm25_tsv_terms(w.tsv) AS t
            ), unfolded AS (
                INSERT INTO bm25_delta (collection_id, chunk_id)
                SELECT collection_id, chunk_id FROM written ORDER BY 1, 2
            ), counted AS (
                INSERT INTO bm25_pending_terms (collection_id, lexeme, df)
                SELECT collection_id, lexeme, count(*) FROM terms GROUP BY 1, 2
            ), lengths AS (
                SELECT collection_id, language, sum(tf_title) AS len_title,
                       sum(tf_body) AS len_body
                FROM terms GROUP BY 1, 2
            )
            INSERT INTO bm25_pending_sizes
                (collection_id, language, chunks, length_title, length_body)
            SELECT w.collection_id, w.language, count(*), coalesce(max(l.len_title), 0),
                   coalesce(max(l.len_body), 0)
            FROM written AS w
            LEFT JOIN lengths AS l USING (collection_id, language)
            GROUP BY 1, 2;
            RETURN;
        END IF;
        -- Without the extension. One statement, so that the test of the extension and the rows
        -- it chooses share a snapshot: an extension created meanwhile gets delta rows.
        WITH written AS MATERIALIZED (
            SELECT ch.id AS chunk_id, ch.collection_id, ch.language, ch.tsv
            FROM unnest(ids) AS i (id) JOIN chunks AS ch USING (id)
        ), terms AS MATERIALIZED (
            SELECT w.chunk_id, w.collection_id, w.language, u.lexeme,
                   cardinality(array_positions(u.weights, 'A')) AS tf_title,
                   cardinality(u.weights) - cardinality(array_positions(u.weights, 'A'))
                       AS tf_body
            FROM written AS w CROSS JOIN LATERAL unnest(w.tsv) AS u
        ), unfolded AS (  -- with the extension: one row per chunk
            INSERT INTO bm25_delta (collection_id, chunk_id)
            SELECT w.collection_id, w.chunk_id FROM written AS w
            WHERE {DELTA_READ}
            ORDER BY 1, 2
        ), added AS (  -- without: one row per posting, the SQL statement's whole index
            INSERT INTO postings (collection_id, lexeme, chunk_id,
                                  tf_title, tf_body, len_title, len_body)
            SELECT t.collection_id, t.lexeme, t.chunk_id, t.tf_title, t.tf_body,
                   sum(t.tf_title) OVER c, sum(t.tf_body) OVER c
            FROM terms AS t
            WHERE NOT {DELTA_READ}
            WINDOW c AS (PARTITION BY t.chunk_id)
            -- In index order: consecutive rows land on the same index pages.
            ORDER BY t.collection_id, t.lexeme
        ), counted AS (
            INSERT INTO bm25_pending_terms (collection_id, lexeme, df)
            SELECT collection_id, lexeme, count(*) FROM terms GROUP BY 1, 2
        ), lengths AS (
            SELECT collection_id, language, sum(tf_title) AS len_title,
                   sum(tf_body) AS len_body
            FROM terms GROUP BY 1, 2
        )
        INSERT INTO bm25_pending_sizes
            (collection_id, language, chunks, length_title, length_body)
        SELECT w.collection_id, w.language, count(*), coalesce(max(l.len_title), 0),
               coalesce(max(l.len_body), 0)
        FROM written AS w
        LEFT JOIN lengths AS l USING (collection_id, language)
        GROUP BY 1, 2;
    END
    $$
    """  # noqa: S608

# As revision 0014's, the chunk delta's rows removed with the posting rows: a removed chunk
# found in neither (with the extension) is in the blocks and becomes dead there.
UNINDEX = f"""
    CREATE OR REPLACE FUNCTION bm25_unindex(ids bigint[], collection_ids bigint[],
                                            languages regconfig[], tsvs tsvector[])
    RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_advisory_xact_lock_shared(417003, (c % 2147483647)::integer)
        FROM (SELECT DISTINCT unnest(collection_ids)) AS s (c);
        -- Chunks deleted with their collection need no statistics: they go with it.
        WITH old AS (
            SELECT * FROM unnest(ids, collection_ids, languages, tsvs)
                AS o (chunk_id, collection_id, language, tsv)
            WHERE EXISTS (SELECT FROM collections WHERE id = o.collection_id)
        ), terms AS (
            SELECT o.chunk_id, o.collection_id, u.lexeme,
                   cardinality(array_positions(u.weights, 'A')) AS tf_title,
                   cardinality(u.weights) - cardinality(array_positions(u.weights, 'A'))
                       AS tf_body
            FROM old AS o CROSS JOIN LATERAL unnest(o.tsv) AS u
        ), gone AS (
            DELETE FROM postings AS p
            USING old
            WHERE p.chunk_id = old.chunk_id
            RETURNING p.chunk_id
        ), unqueued AS (
            DELETE FROM bm25_delta AS d
            USING old
            WHERE d.collection_id = old.collection_id AND d.chunk_id = old.chunk_id
            RETURNING d.chunk_id
        ), folded AS (
            INSERT INTO bm25_dead (collection_id, chunk_id, lexemes)
            SELECT o.collection_id, o.chunk_id, tsvector_to_array(o.tsv)
            FROM old AS o
            WHERE NOT EXISTS (SELECT FROM gone AS g WHERE g.chunk_id = o.chunk_id)
              AND NOT EXISTS (SELECT FROM unqueued AS q WHERE q.chunk_id = o.chunk_id)
              -- Not "the collection has blocks": a fold committing while this statement
              -- waited for the rows it moved would not be seen by that test.
              AND {EXTENSION_PRESENT}
            ON CONFLICT (collection_id, chunk_id) DO NOTHING
        ), counted AS (
            INSERT INTO bm25_pending_terms (collection_id, lexeme, df)
            SELECT collection_id, lexeme, -count(*) FROM terms GROUP BY 1, 2
        )
        INSERT INTO bm25_pending_sizes
            (collection_id, language, chunks, length_title, length_body)
        SELECT o.collection_id, o.language, -count(*),
               -coalesce(sum(l.len_title), 0), -coalesce(sum(l.len_body), 0)
        FROM old AS o
        LEFT JOIN (
            SELECT chunk_id, sum(tf_title) AS len_title, sum(tf_body) AS len_body
            FROM terms GROUP BY chunk_id
        ) AS l USING (chunk_id)
        GROUP BY 1, 2;
    END
    $$
    """  # noqa: S608

# Every posting of a collection wherever it is stored: posting rows, the chunk delta (from the
# chunks' tsvectors; a delta row whose chunk is missing or elsewhere shows as a posting of no
# lexeme, so that `cari bm25 check` counts it), and the blocks less the dead chunks.
STORED_POSTINGS = """
    CREATE OR REPLACE FUNCTION bm25_stored_postings(collection bigint)
    RETURNS TABLE (chunk_id bigint, lexeme text, tf_title integer, tf_body integer,
                   len_title integer, len_body integer)
    LANGUAGE plpgsql STABLE AS $$
    BEGIN
        RETURN QUERY
            SELECT p.chunk_id, p.lexeme, p.tf_title::integer, p.tf_body::integer,
                   p.len_title, p.len_body
            FROM postings AS p WHERE p.collection_id = collection;
        RETURN QUERY
            SELECT d.chunk_id, t.lexeme, t.tf_title, t.tf_body,
                   (sum(t.tf_title) OVER w)::integer, (sum(t.tf_body) OVER w)::integer
            FROM bm25_delta AS d
            LEFT JOIN chunks AS ch ON ch.id = d.chunk_id AND ch.collection_id = collection
            LEFT JOIN LATERAL (
                SELECT u.lexeme, cardinality(array_positions(u.weights, 'A')) AS tf_title,
                       cardinality(u.weights) - cardinality(array_positions(u.weights, 'A'))
                           AS tf_body
                FROM unnest(ch.tsv) AS u
            ) AS t ON true
            WHERE d.collection_id = collection
            WINDOW w AS (PARTITION BY d.chunk_id);
        IF EXISTS (SELECT FROM bm25_blocks AS b WHERE b.collection_id = collection) THEN
            -- Dynamic: the function exists only where the extension is installed.
            RETURN QUERY EXECUTE
                'SELECT u.chunk_id, b.lexeme, u.tf_title, u.tf_body, u.len_title,
                        u.len_body
                 FROM bm25_blocks AS b CROSS JOIN LATERAL bm25_unpack(b.data) AS u
                 WHERE b.collection_id = $1
                   AND NOT EXISTS (SELECT FROM bm25_dead AS d
                                   WHERE d.collection_id = $1 AND d.chunk_id = u.chunk_id)'
                USING collection;
        END IF;
    END
    $$
    """

# As revision 0014's, the moved postings now also the chunk delta's, unnested from the chunks'
# tsvectors in the fold's snapshot (a writer changing a chunk first removes its delta row, which
# the fold holds: the writer waits, or the fold gives way).
FOLD = (
    earlier_revision("0014")
    .fold_function()
    .replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1)
    .replace(
        """                )
                SELECT * FROM moved;
                CREATE TEMP TABLE bm25_fold_gone""",
        """                ), queued AS (
                    DELETE FROM bm25_delta WHERE collection_id = collection
                    RETURNING chunk_id
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
                CREATE TEMP TABLE bm25_fold_gone""",
        1,
    )
)
assert "bm25_delta" in FOLD, "revision 0014's bm25_fold changed: FOLD no longer applies"
