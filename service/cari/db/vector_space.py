"""How vectors of one width are indexed and searched, beside vectors of other widths.

The `embedding` columns are untyped `vector` (any width), so collections embedded by different
models share the tables. Each width in use has its own partial HNSW index on an expression:

    CREATE INDEX chunks_embedding_vector_384_idx ON chunks
        USING hnsw ((embedding::vector(384)) vector_cosine_ops) WHERE vector_dims(embedding) = 384
    CREATE INDEX chunks_embedding_halfvec_3072_idx ON chunks
        USING hnsw ((cari_halfvec(embedding)::halfvec(3072)) halfvec_cosine_ops)
        WHERE vector_dims(embedding) = 3072

Widths of `CARI_HALFVEC_DIMENSIONS` and above are indexed as `halfvec` (16-bit floats: pgvector
indexes `vector` up to 2,000 dimensions, `halfvec` up to 4,000), through `cari_halfvec()`
(migration 0010: it tells the planner what reading such a vector costs); the column keeps the
full vector either way. PostgreSQL uses such an index only for a statement that repeats its
expression and implies its predicate, so the width is a constant in each vector statement
(composed here, never a parameter: a generic prepared plan could not prove the predicate).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from psycopg import sql

from cari.settings import Settings

TABLES = ("chunks", "catalog_items")


@dataclass(frozen=True, slots=True)
class Space:
    """Vectors of `dimension` dimensions, indexed as `kind`."""

    dimension: int
    kind: Literal["vector", "halfvec"]

    @property
    def type(self) -> sql.Composable:
        """The indexed type, `vector(384)` or `halfvec(3072)`, for casts in statements."""
        return sql.SQL("{}({})").format(sql.SQL(self.kind), sql.Literal(self.dimension))

    def indexed(self, column: sql.Composable) -> sql.Composed:
        """The expression the index is on and a statement orders by: `column::vector(384)`, or
        `cari_halfvec(column)::halfvec(3072)` (migration 0010 says why the function)."""
        if self.kind == "vector":
            return sql.SQL("{}::{}").format(column, self.type)
        return sql.SQL("cari_halfvec({})::{}").format(column, self.type)

    def index_name(self, table: str) -> str:
        return f"{table}_embedding_{self.kind}_{self.dimension}_idx"

    def statement(self, name: str, **fragments: sql.Composable) -> sql.Composed:
        """The named statement with this space's `{type}`, `{dimension}` and `{indexed}` (the
        indexed expression of the `embedding` column, qualified by `{alias}` if it names one)
        filled in.

        Run a nearest-neighbour statement with `prepare=False`: psycopg prepares a statement after
        five runs, and PostgreSQL's generic plan then estimates a collection as the table's
        average and the LIMIT as a tenth of it, so once there are a few collections it sorts the
        whole collection read by its btree instead of walking the HNSW index (seen in
        tests/test_faults.py after an autovacuum ANALYZE). An unprepared statement is planned
        with its values every time, costing a fraction of a millisecond."""
        from cari.db.queries import query

        alias = fragments.pop("alias", None)
        column: sql.Composable = sql.Identifier("embedding")
        if alias is not None:
            column = sql.SQL("{}.{}").format(alias, column)
        return sql.SQL(query(name)).format(
            type=self.type,
            dimension=sql.Literal(self.dimension),
            indexed=self.indexed(column),
            **fragments,
        )


def space(dimension: int, settings: Settings) -> Space:
    return Space(dimension, "halfvec" if dimension >= settings.halfvec_dimensions else "vector")


def configured_spaces(settings: Settings) -> list[Space]:
    """The spaces of every embedder a collection may name: the default, the bundled model and
    each CARI_EMBEDDERS profile."""
    from cari.settings import LOCAL_EMBEDDING_DIMENSION

    widths = {LOCAL_EMBEDDING_DIMENSION, *(p.dimensions for p in settings.embedders.values())}
    if settings.embedder == "openai" and settings.embedding_dimensions is not None:
        widths.add(settings.embedding_dimensions)
    return [space(width, settings) for width in sorted(widths)]
