"""Okapi BM25 in PostgreSQL: postings, exact collection statistics, and their upkeep.

Matching stays on the tsvector: a chunk's postings are its tsvector's lexemes with their counts
in the title (weight A) and the body (weight B), kept in step with `chunks` by triggers, so no
write path (Cari's or plain SQL) can leave them stale.

- `postings`: one row per (chunk, lexeme) with the counts BM25 needs; k1, b and the title boost
  apply at query time, so changing them re-indexes nothing.
- Statistics (chunks and lengths per language, document frequency per lexeme) are written as
  append-only deltas by the writing transaction, so concurrent writers never update one hot row
  and cannot deadlock or lose an update; `bm25_compact` folds the deltas into the base tables
  later, in a short transaction of its own. Readers add base and deltas: always exact.
- `bm25_rebuild` recomputes a collection's postings and statistics from its chunks (repair).

Revision ID: 0002
Revises: 0001
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# Advisory locks, keyed (class, collection id): writers hold class 417003 shared and a rebuild
# holds it exclusively; compactions of one collection (class 417004) run one at a time.


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE collections
            ADD COLUMN bm25_k1 double precision NOT NULL DEFAULT 1.2
                CHECK (bm25_k1 >= 0 AND bm25_k1 <= 10),
            ADD COLUMN bm25_b double precision NOT NULL DEFAULT 0.75
                CHECK (bm25_b >= 0 AND bm25_b <= 1),
            ADD COLUMN title_boost double precision NOT NULL DEFAULT 3.0
                CHECK (title_boost >= 0 AND title_boost <= 100)
        """
    )
    # No foreign keys on these tables: a per-row check would cost more than the row itself on
    # bulk loads. The triggers below keep them consistent, and deleting a collection clears them.
    op.execute(
        """
        CREATE TABLE postings (
            collection_id bigint   NOT NULL,
            lexeme        text     NOT NULL,
            chunk_id      bigint   NOT NULL,
            tf_title      smallint NOT NULL,
            tf_body       smallint NOT NULL,
            len_title     integer  NOT NULL,
            len_body      integer  NOT NULL
        )
        """
    )
    # A lexeme's postings, read by searches without touching the heap.
    op.execute(
        """
        CREATE INDEX postings_lexeme_idx ON postings (collection_id, lexeme)
        INCLUDE (chunk_id, tf_title, tf_body, len_title, len_body)
        """
    )
    # A chunk's postings, for deletes.
    op.execute("CREATE INDEX postings_chunk_idx ON postings (chunk_id)")
    for table, key in (
        (
            "bm25_sizes",
            "language regconfig NOT NULL, chunks bigint NOT NULL, "
            "length_title bigint NOT NULL, length_body bigint NOT NULL",
        ),
        ("bm25_terms", "lexeme text NOT NULL, df bigint NOT NULL"),
    ):
        op.execute(f"CREATE TABLE {table} (collection_id bigint NOT NULL, {key})")
        op.execute(f"CREATE TABLE {table.replace('bm25_', 'bm25_pending_')} (LIKE {table})")
    op.execute("ALTER TABLE bm25_sizes ADD PRIMARY KEY (collection_id, language)")
    op.execute("ALTER TABLE bm25_terms ADD PRIMARY KEY (collection_id, lexeme)")
    op.execute("CREATE INDEX bm25_pending_sizes_idx ON bm25_pending_sizes (collection_id)")
    op.execute("CREATE INDEX bm25_pending_terms_idx ON bm25_pending_terms (collection_id, lexeme)")

    # BM25's term-frequency factor: tf·(k1+1) / (tf + k1·(1 - b + b·len/avglen)).
    op.execute(
        """
        CREATE FUNCTION bm25_tf(tf double precision, len double precision,
                                avglen double precision, k1 double precision,
                                b double precision)
        RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE
        RETURN tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avglen))
        """
    )
    # Chunks are looked up by joining the id array (an index probe each), never by
    # `id = ANY (ids)`, which the planner may evaluate as a filter on every row of `chunks`.
    op.execute(index_function())
    # The chunks are gone (or changed): their ids, collections and languages come as arrays.
    op.execute(
        """
        CREATE FUNCTION bm25_unindex(ids bigint[], collection_ids bigint[],
                                     languages regconfig[])
        RETURNS void LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_advisory_xact_lock_shared(417003, (c % 2147483647)::integer)
            FROM (SELECT DISTINCT unnest(collection_ids)) AS s (c);
            -- Chunks deleted with their collection need no statistics: they go with it.
            WITH old AS (
                SELECT * FROM unnest(ids, collection_ids, languages)
                    AS o (chunk_id, collection_id, language)
                WHERE EXISTS (SELECT FROM collections WHERE id = o.collection_id)
            ), gone AS (
                DELETE FROM postings AS p
                USING old
                WHERE p.chunk_id = old.chunk_id
                RETURNING p.collection_id, p.lexeme, p.chunk_id, p.len_title, p.len_body
            ), counted AS (
                INSERT INTO bm25_pending_terms (collection_id, lexeme, df)
                SELECT collection_id, lexeme, -count(*) FROM gone GROUP BY 1, 2
            )
            INSERT INTO bm25_pending_sizes
                (collection_id, language, chunks, length_title, length_body)
            SELECT old.collection_id, old.language, -count(*),
                   -coalesce(sum(l.len_title), 0), -coalesce(sum(l.len_body), 0)
            FROM old
            LEFT JOIN (
                SELECT DISTINCT ON (chunk_id) chunk_id, len_title, len_body FROM gone
            ) AS l USING (chunk_id)
            GROUP BY 1, 2;
        END
        $$
        """
    )
    op.execute(
        """
        CREATE FUNCTION bm25_chunks_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM bm25_index(ARRAY(SELECT id FROM new_chunks));
            RETURN NULL;
        END
        $$
        """
    )
    op.execute(
        """
        CREATE FUNCTION bm25_chunks_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM bm25_unindex(array_agg(id), array_agg(collection_id), array_agg(language))
            FROM old_chunks;
            RETURN NULL;
        END
        $$
        """
    )
    # Only rows whose indexed text changed: re-embedding updates chunks too.
    op.execute(
        """
        CREATE FUNCTION bm25_chunks_updated() RETURNS trigger LANGUAGE plpgsql AS $$
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
                                     array_agg(language))
                FROM old_chunks WHERE id = ANY (changed);
                PERFORM bm25_index(changed);
            END IF;
            RETURN NULL;
        END
        $$
        """
    )
    op.execute(
        """
        CREATE FUNCTION bm25_collections_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM postings WHERE collection_id IN (SELECT id FROM old_collections);
            DELETE FROM bm25_sizes WHERE collection_id IN (SELECT id FROM old_collections);
            DELETE FROM bm25_pending_sizes
            WHERE collection_id IN (SELECT id FROM old_collections);
            DELETE FROM bm25_terms WHERE collection_id IN (SELECT id FROM old_collections);
            DELETE FROM bm25_pending_terms
            WHERE collection_id IN (SELECT id FROM old_collections);
            RETURN NULL;
        END
        $$
        """
    )
    for event, function, tables in (
        ("INSERT", "bm25_chunks_inserted", "NEW TABLE AS new_chunks"),
        ("DELETE", "bm25_chunks_deleted", "OLD TABLE AS old_chunks"),
        ("UPDATE", "bm25_chunks_updated", "OLD TABLE AS old_chunks NEW TABLE AS new_chunks"),
    ):
        op.execute(
            f"""
            CREATE TRIGGER {function} AFTER {event} ON chunks
            REFERENCING {tables} FOR EACH STATEMENT EXECUTE FUNCTION {function}()
            """
        )
    op.execute(
        """
        CREATE TRIGGER bm25_collections_deleted AFTER DELETE ON collections
        REFERENCING OLD TABLE AS old_collections
        FOR EACH STATEMENT EXECUTE FUNCTION bm25_collections_deleted()
        """
    )
    # Fold pending deltas into the base tables. Returns false when another compaction of the
    # collection is running (it may leave the newest deltas for the next one: reads stay exact).
    op.execute(
        """
        CREATE FUNCTION bm25_compact(collection bigint) RETURNS boolean LANGUAGE plpgsql AS $$
        BEGIN
            IF NOT pg_try_advisory_xact_lock(417004, (collection % 2147483647)::integer)
               OR NOT pg_try_advisory_xact_lock_shared(417003,
                                                       (collection % 2147483647)::integer)
            THEN
                RETURN false;
            END IF;
            WITH moved AS (
                DELETE FROM bm25_pending_terms WHERE collection_id = collection
                RETURNING lexeme, df
            )
            INSERT INTO bm25_terms AS t (collection_id, lexeme, df)
            SELECT collection, lexeme, sum(df) FROM moved GROUP BY lexeme
            ON CONFLICT (collection_id, lexeme) DO UPDATE SET df = t.df + excluded.df;
            WITH moved AS (
                DELETE FROM bm25_pending_sizes WHERE collection_id = collection
                RETURNING language, chunks, length_title, length_body
            )
            INSERT INTO bm25_sizes AS s
                (collection_id, language, chunks, length_title, length_body)
            SELECT collection, language, sum(chunks), sum(length_title), sum(length_body)
            FROM moved GROUP BY language
            ON CONFLICT (collection_id, language) DO UPDATE
            SET chunks = s.chunks + excluded.chunks,
                length_title = s.length_title + excluded.length_title,
                length_body = s.length_body + excluded.length_body;
            RETURN true;
        END
        $$
        """
    )
    # Recompute a collection's postings and statistics from its chunks. Waits for the
    # collection's writers to finish and holds new ones back meanwhile.
    op.execute(
        """
        CREATE FUNCTION bm25_rebuild(collection bigint) RETURNS void LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_advisory_xact_lock(417003, (collection % 2147483647)::integer);
            DELETE FROM postings WHERE collection_id = collection;
            DELETE FROM bm25_sizes WHERE collection_id = collection;
            DELETE FROM bm25_pending_sizes WHERE collection_id = collection;
            DELETE FROM bm25_terms WHERE collection_id = collection;
            DELETE FROM bm25_pending_terms WHERE collection_id = collection;
            PERFORM bm25_index(ARRAY(SELECT id FROM chunks WHERE collection_id = collection));
            PERFORM bm25_compact(collection);
        END
        $$
        """
    )
    op.execute("SELECT bm25_rebuild(id) FROM collections")


def downgrade() -> None:
    op.execute("DROP TRIGGER bm25_collections_deleted ON collections")
    for function in ("bm25_chunks_inserted", "bm25_chunks_deleted", "bm25_chunks_updated"):
        op.execute(f"DROP TRIGGER {function} ON chunks")
    op.execute(
        """
        DROP FUNCTION bm25_rebuild, bm25_compact, bm25_collections_deleted,
                      bm25_chunks_updated, bm25_chunks_deleted, bm25_chunks_inserted,
                      bm25_unindex, bm25_index, bm25_tf
        """
    )
    op.execute(
        "DROP TABLE postings, bm25_sizes, bm25_pending_sizes, bm25_terms, bm25_pending_terms"
    )
    op.execute(
        """
        ALTER TABLE collections
            DROP COLUMN bm25_k1, DROP COLUMN bm25_b, DROP COLUMN title_boost
        """
    )


def index_function() -> str:
    """`bm25_index` as this revision creates it (later revisions restore it on downgrade)."""
    return """
        CREATE FUNCTION bm25_index(ids bigint[]) RETURNS void LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_advisory_xact_lock_shared(417003, (c % 2147483647)::integer)
            FROM (
                SELECT DISTINCT ch.collection_id
                FROM unnest(ids) AS i (id) JOIN chunks AS ch USING (id)
            ) AS s (c);
            WITH terms AS (
                SELECT ch.id AS chunk_id, ch.collection_id, u.lexeme,
                       cardinality(array_positions(u.weights, 'A')) AS tf_title,
                       cardinality(u.weights) - cardinality(array_positions(u.weights, 'A'))
                           AS tf_body
                FROM unnest(ids) AS i (id)
                JOIN chunks AS ch USING (id)
                CROSS JOIN LATERAL unnest(ch.tsv) AS u
            ), lengths AS (
                SELECT ch.id AS chunk_id, ch.collection_id, ch.language,
                       coalesce(sum(t.tf_title), 0) AS len_title,
                       coalesce(sum(t.tf_body), 0) AS len_body
                FROM unnest(ids) AS i (id)
                JOIN chunks AS ch USING (id)
                LEFT JOIN terms AS t ON t.chunk_id = ch.id
                GROUP BY ch.id, ch.collection_id, ch.language
            ), added AS (
                INSERT INTO postings (collection_id, lexeme, chunk_id,
                                      tf_title, tf_body, len_title, len_body)
                SELECT t.collection_id, t.lexeme, t.chunk_id,
                       t.tf_title, t.tf_body, l.len_title, l.len_body
                FROM terms AS t
                JOIN lengths AS l USING (chunk_id)
                -- In index order: consecutive rows land on the same index pages.
                ORDER BY t.collection_id, t.lexeme
            ), counted AS (
                INSERT INTO bm25_pending_terms (collection_id, lexeme, df)
                SELECT collection_id, lexeme, count(*) FROM terms GROUP BY 1, 2
            )
            INSERT INTO bm25_pending_sizes
                (collection_id, language, chunks, length_title, length_body)
            SELECT collection_id, language, count(*), sum(len_title), sum(len_body)
            FROM lengths
            GROUP BY 1, 2;
        END
        $$
        """
