"""`query_respelled`: the question's misspelled words and the common words keyword search reads
them as, for the vector side to embed the question respelled.

Until now a misspelled question was embedded as typed: keyword search corrected its words
(`query_corrected`, migration 0019), the vector side read "constructihg aeroelastic modls". For
each word `query_corrected` would correct through a common word, `query_respelled` gives the
word as typed and that common word (the same choice: `common_word` of migration 0019, over the
same suspects), so the service embeds "constructing aeroelastic models". A word corrected
through the collection's own lexemes alone is not respelled: a lexeme is a stem ("effici"), which
an embedding model reads poorly (measured in 2026-12-01's try, which respelled with lexemes).
A mistyped stop word is respelled too ("witi" is "with"): keyword search drops it, the model
reads it.

Revision ID: 0021
Revises: 0020
"""

from alembic import op

from cari.db.migrations import earlier_revision

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

_0019 = earlier_revision("0019")

QUERY_RESPELLED = (
    r"""
    CREATE FUNCTION query_respelled(collection bigint, config regconfig, query text)
    RETURNS TABLE (typed text, word text)
    LANGUAGE sql STABLE PARALLEL SAFE AS $$
"""  # noqa: S608
    + _0019.SUSPECTS
    + r"""
        )
        SELECT DISTINCT s.token, v.word  -- a word typed once, whatever its lexemes
        FROM suspects AS s
        CROSS JOIN LATERAL (
"""
    + _0019.common_word("n.word", word=" g.word,")
    + r"""
        ) AS v
        ORDER BY s.token
    $$
"""
)


def upgrade() -> None:
    op.execute(QUERY_RESPELLED)


def downgrade() -> None:
    op.execute("DROP FUNCTION query_respelled(bigint, regconfig, text)")
