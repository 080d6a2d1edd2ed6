"""`bm25_block_problems`: every row of a collection's packed blocks that a reader cannot trust,
named, with what is wrong.

A reader of `bm25_blocks` (the walker, `bm25_unpack`) relies on each row's payload decoding
completely and on the row agreeing with its payload: `n` postings, the last of them
`last_chunk`, the first after the previous row's `last_chunk` for the same lexeme. `cari bm25
check` compared only the decoded postings with a recount, so a row whose `n` or `last_chunk`
disagreed with its payload passed as exact while the walker refused it, and a payload that did
not decode ended the check at the first one. This function checks each row alone (a payload
that does not decode is caught in its own subtransaction and named, and the walk goes on), so
`cari bm25 check` and a search that meets a damaged block can say which rows are damaged.
`lexemes` NULL checks every lexeme of the collection.

Revision ID: 0025
Revises: 0024
"""

from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

# bm25_unpack exists only where the extension is installed; bm25_blocks has rows only there, and
# PL/pgSQL resolves the name when a row first needs it.
BLOCK_PROBLEMS = """
    CREATE FUNCTION bm25_block_problems(collection bigint, lexemes text[] DEFAULT NULL)
    RETURNS TABLE (lexeme text, last_chunk bigint, problem text)
    LANGUAGE plpgsql STABLE AS $$
    DECLARE
        b record;
        held record;
        previous_lexeme text;
        previous_last bigint;
        detail text;
    BEGIN
        FOR b IN
            SELECT k.lexeme, k.last_chunk, k.n, k.data
            FROM bm25_blocks AS k
            WHERE k.collection_id = collection
              AND (bm25_block_problems.lexemes IS NULL
                   OR k.lexeme = ANY (bm25_block_problems.lexemes))
            ORDER BY k.lexeme, k.last_chunk
        LOOP
            problem := NULL;
            BEGIN
                SELECT count(*)::integer AS n, min(u.chunk_id) AS first,
                       max(u.chunk_id) AS last
                INTO held FROM bm25_unpack(b.data) AS u;
                IF held.n <> b.n THEN
                    problem := format('payload holds %s postings, its row''s n is %s',
                                      held.n, b.n);
                ELSIF held.last <> b.last_chunk THEN
                    problem := format('payload ends at chunk %s, its row''s last_chunk is %s',
                                      held.last, b.last_chunk);
                ELSIF b.lexeme = previous_lexeme AND held.first <= previous_last THEN
                    problem := format('payload starts at chunk %s, not after the previous '
                                      'block''s last_chunk %s', held.first, previous_last);
                END IF;
            EXCEPTION WHEN data_corrupted THEN
                GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
                problem := SQLERRM || coalesce(': ' || nullif(detail, ''), '');
            END;
            IF problem IS NOT NULL THEN
                lexeme := b.lexeme;
                last_chunk := b.last_chunk;
                RETURN NEXT;
            END IF;
            previous_lexeme := b.lexeme;
            previous_last := b.last_chunk;
        END LOOP;
    END
    $$
    """


def upgrade() -> None:
    op.execute(BLOCK_PROBLEMS)


def downgrade() -> None:
    op.execute("DROP FUNCTION bm25_block_problems(bigint, text[])")
