"""What indexing embeddings as `halfvec` (16-bit floats) instead of `vector` costs or saves.

    OMP_NUM_THREADS=1 python -m bench.halfvec [--vectors 12000] [--queries 200] [--wide 1500]

Vectors: real multilingual-e5-small passage and query vectors (384-d) from the benchmarks'
embedding cache (`bench/.cache/embeddings-multilingual-e5-small.sqlite`, filled by
`bench.quality` and the other quality runs), the last `--queries` of them held out as queries.
The 1,536-d set is a deterministic random projection of the same vectors (a Gaussian 384 x 1,536
matrix, seed 0, rows normalised): real neighbourhood structure at the width of OpenAI's
text-embedding-3-small, not a real 1,536-d model.

For each width, one table holds the vectors in an untyped `vector` column as Cari's `chunks`
does, and the index is Cari's own (sql/vector_indexes_create.sql: partial, on the cast to
`vector(d)` or, through `cari_halfvec()`, to `halfvec(d)`; m 16, ef_construction 64), built
once for each type. Each query
runs Cari's statement shape (a constant width, ORDER BY the cast, LIMIT 10) at ef_search 40
and 100 (Cari's default); recall@10 is against the exact top 10 computed in numpy (float32),
latency is the client's wall time per statement (p50 / p95, after one warm-up pass), sizes are
`pg_relation_size` of the index and `pg_table_size` of a table with a `vector` or a `halfvec`
column. `vector` is the baseline: halfvec's figures are also given as a ratio to it.

Then the planner at 3,072 dimensions (`--wide` random unit vectors, 1,500 by default): a
vector that wide lives in TOAST, which PostgreSQL does not count when it costs an exact scan.
One table, two partial HNSW indexes, one on the plain cast `embedding::halfvec(3072)` and one
on Cari's `cari_halfvec(embedding)::halfvec(3072)` (migration 0010); the same top-100 query
ordered by each expression: which plan PostgreSQL picks, and its p50 over 50 queries.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql

from bench import harness
from bench.embedding_cache import cache_path
from bench.harness import fresh_database
from cari.db.migrations import vector_index_statement
from cari.db.vector_space import Space
from cari.settings import load_settings

RESULTS = Path(__file__).resolve().parent / "results" / "halfvec.json"
TABLE = "halfvec_bench"
K = 10


def load_vectors(count: int) -> np.ndarray:
    """`count` cached e5 vectors, in the cache's own (key) order: deterministic."""
    path = cache_path("multilingual-e5-small")
    if not path.exists():
        raise SystemExit(f"{path} is missing: run `python -m bench.quality` first to fill it")
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT vector FROM embeddings ORDER BY key LIMIT ?", (count,))
        vectors = [np.frombuffer(row[0], dtype=np.float32) for row in rows]
    if len(vectors) < count:
        raise SystemExit(f"the cache holds {len(vectors)} vectors, fewer than {count}")
    return np.stack(vectors)


def project(vectors: np.ndarray, width: int) -> np.ndarray:
    """A deterministic Gaussian random projection to `width`, rows normalised."""
    matrix = np.random.default_rng(0).standard_normal((vectors.shape[1], width))
    projected: np.ndarray = (vectors @ matrix).astype(np.float32)
    projected /= np.linalg.norm(projected, axis=1, keepdims=True)
    return projected


def exact_top(corpus: np.ndarray, queries: np.ndarray) -> np.ndarray:
    unit = corpus / np.linalg.norm(corpus, axis=1, keepdims=True)
    scores = queries @ unit.T
    return np.argsort(-scores, axis=1)[:, :K]


def measure(
    conn: psycopg.Connection[Any], space: Space, queries: np.ndarray, exact: np.ndarray
) -> dict[str, Any]:
    settings = load_settings()
    started = time.perf_counter()
    with conn.transaction():
        conn.execute(vector_index_statement(space, TABLE, settings))
    build_s = time.perf_counter() - started
    index = space.index_name(TABLE)
    size = conn.execute("SELECT pg_relation_size(%s::regclass)", (index,)).fetchone()
    statement = sql.SQL(
        "SELECT id FROM {table} WHERE vector_dims(embedding) = {dimension} "
        "ORDER BY {indexed} <=> %s::{type} LIMIT {k}"
    ).format(
        table=sql.Identifier(TABLE),
        indexed=space.indexed(sql.Identifier("embedding")),
        dimension=sql.Literal(space.dimension),
        type=space.type,
        k=sql.Literal(K),
    )
    plan = conn.execute(sql.SQL("EXPLAIN ") + statement, (queries[0],)).fetchall()
    assert index in str(plan), plan
    figures: dict[str, Any] = {"build_s": build_s, "index_mb": (size[0] if size else 0) / 2**20}
    for ef in (40, 100):
        conn.execute(sql.SQL("SET hnsw.ef_search = {}").format(sql.Literal(ef)))
        for query in queries[:20]:  # warm-up: the index into shared buffers
            conn.execute(statement, (query,), prepare=True).fetchall()
        seconds, found = [], []
        for query in queries:
            began = time.perf_counter()
            rows = conn.execute(statement, (query,), prepare=True).fetchall()
            seconds.append(time.perf_counter() - began)
            found.append([int(r[0]) for r in rows])
        recall = np.mean(
            [len(set(f) & set(e.tolist())) / K for f, e in zip(found, exact, strict=True)]
        )
        figures[f"ef{ef}"] = {
            "recall_at_10": float(recall),
            "p50_ms": float(np.percentile(seconds, 50) * 1000),
            "p95_ms": float(np.percentile(seconds, 95) * 1000),
        }
    conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(index)))
    return figures


def table_mb(conn: psycopg.Connection[Any], kind: str, corpus: np.ndarray) -> float:
    """Size of a table holding `corpus` in a column of `kind` (Cari stores `vector`)."""
    name = f"{TABLE}_{kind}"
    conn.execute(
        sql.SQL("CREATE TABLE {} (id int, embedding {})").format(
            sql.Identifier(name), sql.SQL(kind)
        )
    )
    conn.execute(
        sql.SQL("ALTER TABLE {} ALTER COLUMN embedding SET STORAGE MAIN").format(
            sql.Identifier(name)
        )
    )
    with conn.cursor().copy(
        sql.SQL("COPY {} (id, embedding) FROM STDIN").format(sql.Identifier(name))
    ) as copy:
        for i, vector in enumerate(corpus):
            copy.write_row((i, "[" + ",".join(f"{x:.7g}" for x in vector) + "]"))
    row = conn.execute("SELECT pg_table_size(%s::regclass)", (name,)).fetchone()
    conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(name)))
    return (row[0] if row else 0) / 2**20


def planner(conn: psycopg.Connection[Any], count: int, width: int = 3072) -> dict[str, Any]:
    name = f"{TABLE}_wide"
    table = sql.Identifier(name)
    rng = np.random.default_rng(1)
    conn.execute(
        sql.SQL("CREATE TABLE {} (id int PRIMARY KEY, embedding vector STORAGE MAIN)").format(table)
    )
    with conn.cursor().copy(
        sql.SQL("COPY {} (id, embedding) FROM STDIN WITH (FORMAT BINARY)").format(table)
    ) as copy:
        copy.set_types(["int4", "vector"])
        for i in range(count):
            vector = rng.standard_normal(width).astype(np.float32)
            copy.write_row((i, vector / np.linalg.norm(vector)))
    cari = Space(width, "halfvec")
    expressions = {
        "plain cast": sql.SQL("embedding::{}").format(cari.type),
        "cari_halfvec": cari.indexed(sql.Identifier("embedding")),
    }
    for label, expression in expressions.items():
        conn.execute(
            sql.SQL(
                "CREATE INDEX {} ON {} USING hnsw (({}) halfvec_cosine_ops) "
                "WHERE vector_dims(embedding) = {}"
            ).format(
                sql.Identifier(f"{name}_{label.replace(' ', '_')}_idx"),
                table,
                expression,
                sql.Literal(width),
            )
        )
    conn.execute(
        sql.SQL("CREATE STATISTICS {} ON (vector_dims(embedding)) FROM {}").format(
            sql.Identifier(f"{name}_dims"), table
        )
    )
    conn.execute(sql.SQL("VACUUM ANALYZE {}").format(table))
    conn.execute("SET hnsw.ef_search = 100")
    queries = rng.standard_normal((50, width)).astype(np.float32)
    figures: dict[str, Any] = {"chunks": count}
    for label, expression in expressions.items():
        statement = sql.SQL(
            "SELECT id FROM {} WHERE vector_dims(embedding) = {} ORDER BY {} <=> %s::{} LIMIT 100"
        ).format(table, sql.Literal(width), expression, cari.type)
        plan = conn.execute(sql.SQL("EXPLAIN ") + statement, (queries[0],)).fetchall()
        scan = next(str(r[0]).strip("-> ") for r in plan if "Scan" in str(r[0]))
        for query in queries[:5]:
            conn.execute(statement, (query,)).fetchall()
        seconds = []
        for query in queries:
            began = time.perf_counter()
            conn.execute(statement, (query,)).fetchall()
            seconds.append(time.perf_counter() - began)
        figures[label] = {
            "plan": scan.split("  (")[0],
            "p50_ms": float(np.percentile(seconds, 50) * 1000),
        }
        print(f"  {label:<13} {figures[label]['p50_ms']:7.2f} ms  {figures[label]['plan']}")
    conn.execute(sql.SQL("DROP TABLE {}").format(table))
    return figures


def run(vectors: int, queries: int, wide: int) -> dict[str, Any]:
    settings = load_settings()
    dsn = fresh_database("cari_bench_halfvec", settings)
    base = load_vectors(vectors + queries)
    report: dict[str, Any] = {
        "vectors": vectors,
        "queries": queries,
        "omp_num_threads": harness.omp_note(),
        "widths": {},
    }
    for width in (384, 1536):
        data = base if width == 384 else project(base, width)
        corpus, asked = data[:vectors], data[vectors:]
        exact = exact_top(corpus, asked)
        with psycopg.connect(dsn, autocommit=True) as conn:
            register_vector(conn)
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(TABLE)))
            conn.execute(
                sql.SQL(
                    "CREATE TABLE {} (id int PRIMARY KEY, embedding vector STORAGE MAIN)"
                ).format(sql.Identifier(TABLE))
            )
            with conn.cursor().copy(
                sql.SQL("COPY {} (id, embedding) FROM STDIN WITH (FORMAT BINARY)").format(
                    sql.Identifier(TABLE)
                )
            ) as copy:
                copy.set_types(["int4", "vector"])
                for i, vector in enumerate(corpus):
                    copy.write_row((i, vector))
            conn.execute(  # as migration 0010 gives chunks
                sql.SQL("CREATE STATISTICS {} ON (vector_dims(embedding)) FROM {}").format(
                    sql.Identifier(f"{TABLE}_dims"), sql.Identifier(TABLE)
                )
            )
            conn.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.Identifier(TABLE)))
            figures = {
                kind: measure(conn, Space(width, kind), asked, exact)
                for kind in ("vector", "halfvec")
            }
            for kind in ("vector", "halfvec"):
                figures[kind]["table_mb"] = table_mb(conn, kind, corpus)
            conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(TABLE)))
        report["widths"][str(width)] = figures
        show(width, figures)
    print(f"\nthe planner at 3,072 dimensions, {wide:,} chunks (p50 of a top-100 query, plan)")
    with psycopg.connect(dsn, autocommit=True) as conn:
        register_vector(conn)
        report["planner"] = planner(conn, wide)
    return report


def show(width: int, figures: dict[str, Any]) -> None:
    base, half = figures["vector"], figures["halfvec"]
    print(f"\n{width} dimensions (halfvec / vector in brackets)")
    print(
        f"  index size MB   vector {base['index_mb']:8.1f}  halfvec {half['index_mb']:8.1f}"
        f"  ({half['index_mb'] / base['index_mb']:.2f})"
    )
    print(
        f"  table size MB   vector {base['table_mb']:8.1f}  halfvec {half['table_mb']:8.1f}"
        f"  ({half['table_mb'] / base['table_mb']:.2f})"
    )
    print(
        f"  build s         vector {base['build_s']:8.1f}  halfvec {half['build_s']:8.1f}"
        f"  ({half['build_s'] / base['build_s']:.2f})"
    )
    for ef in ("ef40", "ef100"):
        b, h = base[ef], half[ef]
        print(
            f"  {ef:<5} recall@10  vector {b['recall_at_10']:.4f}  halfvec {h['recall_at_10']:.4f}"
        )
        print(
            f"  {ef:<5} p50 ms     vector {b['p50_ms']:8.2f}  halfvec {h['p50_ms']:8.2f}"
            f"  ({h['p50_ms'] / b['p50_ms']:.2f})"
        )
        print(
            f"  {ef:<5} p95 ms     vector {b['p95_ms']:8.2f}  halfvec {h['p95_ms']:8.2f}"
            f"  ({h['p95_ms'] / b['p95_ms']:.2f})"
        )


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--vectors", type=int, default=12_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--wide", type=int, default=1500)
    args = parser.parse_args()
    report = run(args.vectors, args.queries, args.wide)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwritten to {RESULTS}")


if __name__ == "__main__":
    main()
