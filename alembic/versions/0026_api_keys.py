"""API keys stored in the database, managed live (`cari keys`, `/v1/keys`).

- `api_keys`: one row a key. `prefix` is the key's visible id (`cari_3f9a1b2c`), the start of
  the secret, shown in lists and logs; `secret_hash` the SHA-256 of the whole secret, the only
  trace of it (cari.keys says why a fast hash suffices). `actions` what it may do,
  `collections` the names or glob patterns (`shop-*`) it reaches, `filter` (a search filter's
  `metadata` object) the documents it sees, NULL: all of them. A revoked key keeps its row
  (`revoked_at`): once any row exists the API asks every request for a key.

Revision ID: 0026
Revises: 0025
"""

from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE api_keys (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            name text NOT NULL CHECK (name <> ''),
            prefix text NOT NULL UNIQUE,
            secret_hash bytea NOT NULL UNIQUE CHECK (length(secret_hash) = 32),
            actions text[] NOT NULL CHECK (cardinality(actions) > 0),
            collections text[] NOT NULL CHECK (cardinality(collections) > 0),
            filter jsonb CHECK (filter IS NULL OR jsonb_typeof(filter) = 'object'),
            expires_at timestamptz,
            created_at timestamptz NOT NULL DEFAULT now(),
            last_used_at timestamptz,
            revoked_at timestamptz
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE api_keys")
