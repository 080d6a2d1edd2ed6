"""Per-collection keyword lists of the intent router (pricing and financing), EN and ID.

Every collection starts with the lists below, the router's defaults at the time of this
migration (service/cari/search/router.py holds the current ones for new collections).

Revision ID: 0004
Revises: 0003
"""

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

PRICING = (
    "harga", "price", "prices", "berapa", "biaya", "cost", "costs", "tarif", "pricing", "promo",
    "diskon", "discount", "budget", "kisaran", "sekitar", "how much", "murah", "mahal",
    "cheap", "expensive",
)  # fmt: skip
FINANCING = (
    "cicilan", "angsuran", "kredit", "dp", "tenor", "installment", "installments", "instalment",
    "down payment", "monthly payment", "bunga", "interest", "leasing", "finance", "financing",
    "otr", "uang muka", "per bulan", "per month", "nyicil", "loan", "pinjaman", "credit",
)  # fmt: skip


def _array(words: tuple[str, ...]) -> str:
    # Literal constants of this file, never user input.
    return "ARRAY[" + ", ".join(f"'{w}'" for w in words) + "]::text[]"


def upgrade() -> None:
    op.execute(
        f"""
        ALTER TABLE collections
            ADD COLUMN pricing_keywords text[] NOT NULL DEFAULT {_array(PRICING)},
            ADD COLUMN financing_keywords text[] NOT NULL DEFAULT {_array(FINANCING)}
        """
    )


def downgrade() -> None:
    op.execute(
        "ALTER TABLE collections DROP COLUMN pricing_keywords, DROP COLUMN financing_keywords"
    )
