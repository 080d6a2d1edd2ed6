"""Packed posting blocks for the `cari_bm25` extension, and the delta they fold from.

- `bm25_blocks`: a lexeme's postings in a collection, packed by the extension's `bm25_pack`
  (ascending chunk ids, at most 1,024 postings and 1,800 bytes a row, so PostgreSQL never
  compresses or moves a payload out of line and the walker reads it in place). A block holds
  the chunk ids after the previous block's `last_chunk` up to its own.
- `bm25_dead`: chunks deleted or re-indexed whose postings are still inside blocks, with the
  lexemes they had; readers skip them, the next fold removes them.
- `postings` becomes the delta: what was written since the last fold. Without the extension
  nothing is folded, `postings` holds everything and the SQL statement serves, as before.

A chunk's postings are in exactly one place: the delta, or the blocks (alive unless dead). The
statistics are unchanged (base tables plus pending deltas), now counted from the chunks' own
tsvectors on delete, since a folded chunk has no posting rows left to count from.

`bm25_fold(collection)` moves the delta into blocks in one transaction: it rewrites only the
blocks the changed chunk ids fall in (appends: the lexeme's last block). It gives way to
writers: it waits at most `lock_timeout` for a row a writer holds and then folds nothing,
so a writer never loses a deadlock to it. Deleting a collection first waits for its compaction
or fold (which then skip it), so neither loses a deadlock to the other either.

Revision ID: 0014
Revises: 0013
"""

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

# A fold gives up on a row a writer holds after this long, well before PostgreSQL's deadlock
# check (deadlock_timeout, 1 s by default) could pick the writer as the victim.
FOLD_LOCK_TIMEOUT = "100ms"


def upgrade() -> None:
    # A posting whose boosted count is 0 (a title word when titles count for nothing) scores 0:
    # with k1 also 0 the formula was 0/0, and every search of the collection failed.
    op.execute(_tf(zero_safe=True))
    op.execute(
        """
        CREATE TABLE bm25_blocks (
            collection_id bigint  NOT NULL,
            lexeme        text    NOT NULL,
            last_chunk    bigint  NOT NULL,
            n             integer NOT NULL CHECK (n > 0),
            data          bytea   NOT NULL,
            PRIMARY KEY (collection_id, lexeme, last_chunk)
        )
        """
    )
    op.execute(
        """
        CREATE TABLE bm25_dead (
            collection_id bigint NOT NULL,
            chunk_id      bigint NOT NULL,
            lexemes       text[] NOT NULL,
            PRIMARY KEY (collection_id, chunk_id)
        )
        """
    )
    # Statistics from the removed chunks' tsvectors; their postings leave the delta, or, when
    # they were folded (with the extension), the chunks are marked dead in the blocks.
    op.execute("DROP FUNCTION bm25_unindex(bigint[], bigint[], regconfig[])")
    op.execute(_unindex(blocks=True))
    op.execute(
        """
        CREATE OR REPLACE FUNCTION bm25_chunks_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM bm25_unindex(array_agg(id), array_agg(collection_id), array_agg(language),
                                 array_agg(tsv))
            FROM old_chunks;
            RETURN NULL;
        END
        $$
        """
    )
    op.execute(
        """
        CREATE OR REPLACE FUNCTION bm25_chunks_updated() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            changed bigint[];
        BEGIN
            SELECT array_agg(o.id) INTO changed
            FROM old_chunks AS o JOIN new_chunks AS n USING (id)
            WHERE o.tsv IS DISTINCT FROM n.tsv
               OR o.collection_id <> n.collection_id
               OR o.language <> n.language;
            IF changed IS NOT NULL THEN
                PERFORM bm25_unindex(array_agg(id), array_agg(collection_id),
                                     array_agg(language), array_agg(tsv))
                FROM old_chunks WHERE id = ANY (changed);
                PERFORM bm25_index(changed);
            END IF;
            RETURN NULL;
        END
        $$
        """
    )
    op.execute(_collections_deleted(blocks=True))
    # A collection being deleted first waits for its compaction or fold and keeps new ones out
    # (they try the lock and skip): they touch the statistics and postings rows the delete
    # clears in another order, and a write's compaction used to lose a deadlock to it. Before
    # the row goes, so before its chunks cascade.
    op.execute(
        """
        CREATE FUNCTION bm25_collection_deleting() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_advisory_xact_lock(417004, (OLD.id % 2147483647)::integer);
            RETURN OLD;
        END
        $$
        """
    )
    op.execute(
        """
        CREATE TRIGGER bm25_collection_deleting BEFORE DELETE ON collections
        FOR EACH ROW EXECUTE FUNCTION bm25_collection_deleting()
        """
    )
    # Every posting of a collection, wherever it is stored: the delta, and (with the extension)
    # the blocks less the dead chunks. `cari bm25 check` compares it with a recount.
    op.execute(stored_postings_function())
    op.execute(fold_function())
    # A rebuild recounts into the delta, then folds it when the extension is there.
    op.execute(_rebuild(blocks=True))


def downgrade() -> None:
    # Blocks cannot be read without the extension: unfold them into the delta first.
    op.execute(
        """
        INSERT INTO postings (collection_id, lexeme, chunk_id, tf_title, tf_body, len_title,
                              len_body)
        SELECT c.id, s.lexeme, s.chunk_id, s.tf_title, s.tf_body, s.len_title, s.len_body
        FROM collections AS c
        CROSS JOIN LATERAL bm25_stored_postings(c.id) AS s
        WHERE EXISTS (SELECT FROM bm25_blocks AS b WHERE b.collection_id = c.id)
          AND NOT EXISTS (SELECT FROM postings AS p
                          WHERE p.collection_id = c.id AND p.chunk_id = s.chunk_id
                            AND p.lexeme = s.lexeme)
        """
    )
    op.execute("DROP TRIGGER bm25_collection_deleting ON collections")
    op.execute("DROP FUNCTION bm25_collection_deleting()")
    op.execute(_unindex(blocks=False))
    op.execute(_collections_deleted(blocks=False))
    op.execute(_rebuild(blocks=False))
    op.execute(_tf(zero_safe=False))
    op.execute("DROP FUNCTION bm25_fold(bigint)")
    op.execute("DROP FUNCTION bm25_stored_postings(bigint)")
    op.execute("DROP TABLE bm25_dead")
    op.execute("DROP TABLE bm25_blocks")


# The functions below come in two states: with blocks (this revision) and without (its
# downgrade, which behaves as revision 0013 did; the removed chunks' statistics are counted
# from their tsvectors in both, which equals counting their posting rows).


def _unindex(*, blocks: bool) -> str:
    dead = (
        """
            ), folded AS (
                INSERT INTO bm25_dead (collection_id, chunk_id, lexemes)
                SELECT o.collection_id, o.chunk_id, tsvector_to_array(o.tsv)
                FROM old AS o
                WHERE NOT EXISTS (SELECT FROM gone AS g WHERE g.chunk_id = o.chunk_id)
                  -- Not "the collection has blocks": a fold committing while this statement
                  -- waited for the rows it moved would not be seen by that test.
                  AND EXISTS (SELECT FROM pg_extension WHERE extname = 'cari_bm25')
                ON CONFLICT (collection_id, chunk_id) DO NOTHING"""
        if blocks
        else ""
    )
    return f"""
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
                RETURNING p.chunk_id{dead}
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


def _tables(*, blocks: bool, extra: tuple[str, ...] = ()) -> list[str]:
    """A collection's keyword index: what deleting or rebuilding it clears (`extra`: the
    tables later revisions add)."""
    packed = ["bm25_blocks", "bm25_dead"] if blocks else []
    return [
        "postings",
        *extra,
        *packed,
        "bm25_sizes",
        "bm25_pending_sizes",
        "bm25_terms",
        "bm25_pending_terms",
    ]


def _collections_deleted(*, blocks: bool, extra: tuple[str, ...] = ()) -> str:
    deletes = "\n".join(
        f"DELETE FROM {t} WHERE collection_id IN (SELECT id FROM old_collections);"  # noqa: S608
        for t in _tables(blocks=blocks, extra=extra)
    )
    return f"""
        CREATE OR REPLACE FUNCTION bm25_collections_deleted() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            {deletes}
            RETURN NULL;
        END
        $$
        """


def _rebuild(*, blocks: bool, extra: tuple[str, ...] = ()) -> str:
    deletes = "\n".join(
        f"DELETE FROM {t} WHERE collection_id = collection;"  # noqa: S608
        for t in _tables(blocks=blocks, extra=extra)
    )
    fold = "PERFORM bm25_fold(collection);" if blocks else ""
    return f"""
        CREATE OR REPLACE FUNCTION bm25_rebuild(collection bigint) RETURNS void
        LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_advisory_xact_lock(417003, (collection % 2147483647)::integer);
            {deletes}
            PERFORM bm25_index(ARRAY(SELECT id FROM chunks WHERE collection_id = collection));
            PERFORM bm25_compact(collection);
            {fold}
        END
        $$
        """  # noqa: S608


def _tf(*, zero_safe: bool) -> str:
    # BM25's term-frequency factor: tf·(k1+1) / (tf + k1·(1 - b + b·len/avglen)); the
    # extension computes the same expression and scores a zero count 0.
    factor = "tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avglen))"
    body = f"CASE WHEN tf = 0 THEN 0 ELSE {factor} END" if zero_safe else factor
    return f"""
        CREATE OR REPLACE FUNCTION bm25_tf(tf double precision, len double precision,
                                           avglen double precision, k1 double precision,
                                           b double precision)
        RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE
        RETURN {body}
        """


def fold_function() -> str:
    """`bm25_fold` as this revision creates it (later revisions restore it on downgrade)."""
    return f"""
        CREATE FUNCTION bm25_fold(collection bigint) RETURNS boolean LANGUAGE plpgsql AS $$
        BEGIN
            IF NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'cari_bm25')
               OR NOT pg_try_advisory_xact_lock(417004, (collection % 2147483647)::integer)
               OR NOT pg_try_advisory_xact_lock_shared(417003,
                                                       (collection % 2147483647)::integer)
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
                )
                SELECT * FROM moved;
                CREATE TEMP TABLE bm25_fold_gone ON COMMIT DROP AS
                WITH gone AS (
                    DELETE FROM bm25_dead WHERE collection_id = collection
                    RETURNING chunk_id, lexemes
                )
                SELECT l.lexeme, g.chunk_id FROM gone AS g, unnest(g.lexemes) AS l (lexeme);
                -- Each changed id's block: the first ending at or after it; past the
                -- lexeme's last block (appends), that last block; NULL when it has none.
                -- A binary search (width_bucket) in each lexeme's sorted block ends.
                CREATE TEMP TABLE bm25_fold_home ON COMMIT DROP AS
                WITH touched AS (
                    SELECT lexeme, chunk_id FROM bm25_fold_moved
                    UNION
                    SELECT lexeme, chunk_id FROM bm25_fold_gone
                ), ends AS (
                    SELECT b.lexeme, array_agg(b.last_chunk ORDER BY b.last_chunk) AS lasts
                    FROM bm25_blocks AS b
                    WHERE b.collection_id = collection
                      AND b.lexeme IN (SELECT lexeme FROM touched)
                    GROUP BY b.lexeme
                )
                SELECT t.lexeme, t.chunk_id,
                       coalesce(e.lasts[width_bucket(t.chunk_id - 1, e.lasts) + 1],
                                e.lasts[cardinality(e.lasts)]) AS home
                FROM touched AS t LEFT JOIN ends AS e USING (lexeme);
                CREATE TEMP TABLE bm25_fold_old ON COMMIT DROP AS
                WITH rewritten AS (
                    DELETE FROM bm25_blocks AS b
                    USING (SELECT DISTINCT lexeme, home FROM bm25_fold_home
                           WHERE home IS NOT NULL) AS h
                    WHERE b.collection_id = collection AND b.lexeme = h.lexeme
                      AND b.last_chunk = h.home
                    RETURNING b.lexeme, b.last_chunk, b.data
                )
                SELECT r.lexeme, r.last_chunk AS home, u.chunk_id, u.tf_title, u.tf_body,
                       u.len_title, u.len_body
                FROM rewritten AS r CROSS JOIN LATERAL bm25_unpack(r.data) AS u;
                INSERT INTO bm25_blocks (collection_id, lexeme, last_chunk, n, data)
                SELECT collection, g.lexeme, p.last_chunk, p.n, p.data
                FROM (
                    SELECT x.lexeme, x.home,
                           array_agg(x.chunk_id ORDER BY x.chunk_id) AS ids,
                           array_agg(x.tf_title ORDER BY x.chunk_id) AS tf_title,
                           array_agg(x.tf_body ORDER BY x.chunk_id) AS tf_body,
                           array_agg(x.len_title ORDER BY x.chunk_id) AS len_title,
                           array_agg(x.len_body ORDER BY x.chunk_id) AS len_body
                    FROM (
                        SELECT o.lexeme, o.home, o.chunk_id, o.tf_title, o.tf_body,
                               o.len_title, o.len_body
                        FROM bm25_fold_old AS o
                        WHERE NOT EXISTS (SELECT FROM bm25_fold_gone AS d
                                          WHERE d.lexeme = o.lexeme
                                            AND d.chunk_id = o.chunk_id)
                        UNION ALL
                        SELECT m.lexeme, h.home, m.chunk_id, m.tf_title, m.tf_body,
                               m.len_title, m.len_body
                        FROM bm25_fold_moved AS m
                        JOIN bm25_fold_home AS h USING (lexeme, chunk_id)
                    ) AS x
                    GROUP BY x.lexeme, x.home
                ) AS g
                CROSS JOIN LATERAL bm25_pack(g.ids, g.tf_title, g.tf_body, g.len_title,
                                             g.len_body) AS p;
                DROP TABLE bm25_fold_moved, bm25_fold_gone, bm25_fold_home, bm25_fold_old;
            EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
                RETURN false;  -- a writer holds the delta's rows: fold another time
            END;
            RETURN true;
        END
        $$
        """  # noqa: S608


def stored_postings_function() -> str:
    """`bm25_stored_postings` as this revision creates it (restored on later downgrades)."""
    return """
        CREATE FUNCTION bm25_stored_postings(collection bigint)
        RETURNS TABLE (chunk_id bigint, lexeme text, tf_title integer, tf_body integer,
                       len_title integer, len_body integer)
        LANGUAGE plpgsql STABLE AS $$
        BEGIN
            RETURN QUERY
                SELECT p.chunk_id, p.lexeme, p.tf_title::integer, p.tf_body::integer,
                       p.len_title, p.len_body
                FROM postings AS p WHERE p.collection_id = collection;
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
