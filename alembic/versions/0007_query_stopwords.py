"""Stop words for Indonesian queries, and one analysis of a query's words for both retrieval
statements.

PostgreSQL's `indonesian` configuration stems but has no stop word list, so every question word
and particle of an Indonesian query ("siapakah", "yang", "di") was a search term. Question words
are rare in the declarative text of documents, so BM25 gave them a high idf and ranked chunks
that happen to hold "apakah" or "berapa" by them. `query_stopwords` lists, per text-search
configuration, lexemes that a query's analysis drops; `query_lexemes(config, text)` is that
analysis, used by keyword search and the relevance evidence alike. Documents are indexed
unchanged (stop words still count in chunk lengths), so the list can change without
reindexing.

The Indonesian rows are the function words below as the server's own `indonesian`
configuration stems them. Words whose stem is also the stem of common content words are left
out ("tersebut" stems to "sebut", as "disebut" does; "dapat" to "dapat", as "mendapat" does;
"dia" to "dia", as "media" does).

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

INDONESIAN = """
    apa apakah siapa siapakah kapan kapankah bilamana mana manakah dimana dimanakah kemana
    darimana berapa berapakah bagaimana bagaimanakah mengapa mengapakah kenapa
    saya kamu beliau kami kita mereka engkau ini itu begitu demikian sini situ sana
    di ke dari pada untuk dengan oleh kepada daripada antara sejak hingga sampai tanpa seperti
    sebagai per dan atau namun maka karena jika jikalau kalau apabila bila agar supaya sehingga
    bahwa meskipun walaupun ketika saat sedangkan yaitu yakni adalah ialah ia
    akan telah sudah sedang masih belum pernah bisa boleh harus mesti mau
    tidak bukan tak jangan yang juga pun saja hanya lagi sangat paling sekali para sang si
    semua setiap tiap beberapa segala sebuah seorang suatu sesuatu
"""


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE query_stopwords (
            language regconfig NOT NULL,
            lexeme   text      NOT NULL,
            PRIMARY KEY (language, lexeme)
        )
        """
    )
    # Stemmed by this server's configuration, so the rows match what its queries produce. A
    # server without an `indonesian` configuration gets no rows.
    op.execute(
        sa.text(
            """
            INSERT INTO query_stopwords (language, lexeme)
            SELECT DISTINCT c.oid::regconfig, w.lexeme
            FROM pg_ts_config AS c,
                 unnest(to_tsvector(c.oid::regconfig, CAST(:words AS text))) AS w
            WHERE c.cfgname = 'indonesian' AND c.cfgnamespace = 'pg_catalog'::regnamespace
            """
        ).bindparams(words=" ".join(INDONESIAN.split()))
    )
    # A plain SQL body, so the planner inlines it into the statement that calls it.
    op.execute(
        """
        CREATE FUNCTION query_lexemes(config regconfig, query text)
        RETURNS SETOF text LANGUAGE sql STABLE PARALLEL SAFE AS $$
            SELECT DISTINCT w.lexeme
            FROM unnest(to_tsvector(config, query)) AS w
            WHERE NOT EXISTS (
                SELECT FROM query_stopwords AS s
                WHERE s.language = config AND s.lexeme = w.lexeme
            )
        $$
        """
    )


def downgrade() -> None:
    op.execute("DROP FUNCTION query_lexemes(regconfig, text)")
    op.execute("DROP TABLE query_stopwords")
