"""Initial schema: collections, documents, chunks (tsvector + vector), structured sources.

The embedding width and the HNSW build parameters come from Cari's settings at migration time.
pgvector's HNSW indexes `vector` up to 2,000 dimensions: a wider embedding gets no index here
(this revision failed on it), and migration 0010 builds its `halfvec` one.

Revision ID: 0001
Revises:
"""

from alembic import context, op

# The widest `vector` pgvector's HNSW can index.
HNSW_VECTOR_MAX_DIMENSIONS = 2000

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _index_parameters() -> dict[str, int]:
    settings = context.config.attributes["settings"]
    values = {
        "dimension": settings.embedding_dimension,
        "m": settings.hnsw_m,
        "ef_construction": settings.hnsw_ef_construction,
    }
    # Validated integers from settings, never user text: safe to place in DDL.
    assert all(isinstance(value, int) and value > 0 for value in values.values())
    return values


def upgrade() -> None:
    p = _index_parameters()
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    op.execute(
        """
        CREATE TABLE collections (
            id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            name           text NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
            language       regconfig NOT NULL DEFAULT 'simple',
            search_mode    text NOT NULL DEFAULT 'hybrid'
                           CHECK (search_mode IN ('hybrid', 'vector', 'keyword')),
            vector_weight  double precision NOT NULL DEFAULT 1.0 CHECK (vector_weight >= 0),
            keyword_weight double precision NOT NULL DEFAULT 1.0 CHECK (keyword_weight >= 0),
            rrf_k          integer NOT NULL DEFAULT 60 CHECK (rrf_k >= 1),
            threshold      double precision NOT NULL DEFAULT 0.25 CHECK (threshold BETWEEN 0 AND 1),
            top_k          integer NOT NULL DEFAULT 5 CHECK (top_k BETWEEN 1 AND 50),
            created_at     timestamptz NOT NULL DEFAULT now(),
            updated_at     timestamptz NOT NULL DEFAULT now()
        )
        """
    )
    op.execute(
        """
        CREATE TABLE documents (
            id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            collection_id bigint NOT NULL REFERENCES collections (id) ON DELETE CASCADE,
            external_id   text NOT NULL CHECK (length(external_id) BETWEEN 1 AND 512),
            title         text NOT NULL DEFAULT '',
            source        text,
            metadata      jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(metadata) = 'object'),
            content_hash  text NOT NULL,
            created_at    timestamptz NOT NULL DEFAULT now(),
            updated_at    timestamptz NOT NULL DEFAULT now(),
            UNIQUE (collection_id, external_id)
        )
        """
    )
    # One row per retrievable chunk. `language` is copied from the collection (or the
    # document) so the generated tsvector can use it: title weighs A, body B.
    op.execute(
        f"""
        CREATE TABLE chunks (
            id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            collection_id bigint NOT NULL REFERENCES collections (id) ON DELETE CASCADE,
            document_id   bigint NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
            ordinal       integer NOT NULL CHECK (ordinal >= 0),
            title         text NOT NULL DEFAULT '',
            content       text NOT NULL,
            metadata      jsonb NOT NULL DEFAULT '{{}}',
            language      regconfig NOT NULL,
            token_count   integer NOT NULL DEFAULT 0,
            tsv           tsvector GENERATED ALWAYS AS (
                              setweight(to_tsvector(language, title), 'A')
                              || setweight(to_tsvector(language, content), 'B')
                          ) STORED,
            embedding     vector({p["dimension"]}),
            UNIQUE (document_id, ordinal)
        )
        """
    )
    op.execute("CREATE INDEX chunks_collection_idx ON chunks (collection_id)")
    # Chunks stored while the embedder was down, found quickly by `cari reembed`.
    op.execute("CREATE INDEX chunks_unembedded_idx ON chunks (id) WHERE embedding IS NULL")
    op.execute("CREATE INDEX chunks_tsv_idx ON chunks USING gin (tsv)")
    if p["dimension"] <= HNSW_VECTOR_MAX_DIMENSIONS:
        op.execute(
            f"""
            CREATE INDEX chunks_embedding_idx ON chunks
            USING hnsw (embedding vector_cosine_ops)
            WITH (m = {p["m"]}, ef_construction = {p["ef_construction"]})
            """
        )
    # Structured sources for the intent router: products (pricing, specs) and financing.
    op.execute(
        f"""
        CREATE TABLE catalog_items (
            id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            collection_id bigint NOT NULL REFERENCES collections (id) ON DELETE CASCADE,
            sku           text NOT NULL CHECK (length(sku) BETWEEN 1 AND 200),
            name          text NOT NULL,
            variant       text NOT NULL DEFAULT '',
            price         numeric(20, 2) CHECK (price >= 0),
            currency      text NOT NULL DEFAULT 'IDR' CHECK (currency ~ '^[A-Z]{{3}}$'),
            attributes    jsonb NOT NULL DEFAULT '{{}}'
                          CHECK (jsonb_typeof(attributes) = 'object'),
            language      regconfig NOT NULL,
            tsv           tsvector GENERATED ALWAYS AS (
                              setweight(to_tsvector(language, sku || ' ' || name), 'A')
                              || setweight(to_tsvector(language, variant), 'B')
                              || setweight(
                                     jsonb_to_tsvector(language, attributes, '["string", "key"]'),
                                     'C')
                          ) STORED,
            embedding     vector({p["dimension"]}),
            created_at    timestamptz NOT NULL DEFAULT now(),
            updated_at    timestamptz NOT NULL DEFAULT now(),
            UNIQUE (collection_id, sku)
        )
        """
    )
    op.execute("CREATE INDEX catalog_items_tsv_idx ON catalog_items USING gin (tsv)")
    if p["dimension"] <= HNSW_VECTOR_MAX_DIMENSIONS:
        op.execute(
            f"""
            CREATE INDEX catalog_items_embedding_idx ON catalog_items
            USING hnsw (embedding vector_cosine_ops)
            WITH (m = {p["m"]}, ef_construction = {p["ef_construction"]})
            """
        )
    # rate: yearly interest as a fraction (0.085 = 8.5 %/year);
    # min_down_payment: the smallest down payment as a fraction of the price.
    op.execute(
        """
        CREATE TABLE financing_rates (
            id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            collection_id    bigint NOT NULL REFERENCES collections (id) ON DELETE CASCADE,
            provider         text NOT NULL CHECK (length(provider) BETWEEN 1 AND 200),
            tenor_months     integer NOT NULL CHECK (tenor_months BETWEEN 1 AND 600),
            rate             numeric(9, 6) NOT NULL CHECK (rate >= 0 AND rate < 1),
            rate_type        text NOT NULL CHECK (rate_type IN ('flat', 'annuity')),
            min_down_payment numeric(9, 6) NOT NULL DEFAULT 0
                             CHECK (min_down_payment >= 0 AND min_down_payment < 1),
            created_at       timestamptz NOT NULL DEFAULT now(),
            updated_at       timestamptz NOT NULL DEFAULT now(),
            UNIQUE (collection_id, provider, tenor_months, rate_type)
        )
        """
    )


def downgrade() -> None:
    # Extensions stay: other schemas on a shared server may use them.
    for table in ("financing_rates", "catalog_items", "chunks", "documents", "collections"):
        op.execute(f"DROP TABLE IF EXISTS {table}")
