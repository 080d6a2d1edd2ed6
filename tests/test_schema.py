"""The chunks table's two indexes: weighted tsvector (GIN) and embedding (HNSW)."""

import re
from typing import Any

import numpy as np
import psycopg

Conn = psycopg.Connection[Any]


def _collection(conn: Conn, language: str = "english") -> int:
    row = conn.execute(
        "INSERT INTO collections (name, language) VALUES ('c', %s::regconfig) RETURNING id",
        (language,),
    ).fetchone()
    assert row is not None
    return int(row[0])


def _document(conn: Conn, collection_id: int, external_id: str) -> int:
    row = conn.execute(
        "INSERT INTO documents (collection_id, external_id, content_hash) "
        "VALUES (%s, %s, 'h') RETURNING id",
        (collection_id, external_id),
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_title_weighs_above_body(conn: Conn) -> None:
    cid = _collection(conn)
    for external_id, title, content in [
        ("in-body", "Engine maintenance", "How to replace the turbocharger safely."),
        ("in-title", "Turbocharger guide", "How to replace it safely."),
    ]:
        doc = _document(conn, cid, external_id)
        conn.execute(
            "INSERT INTO chunks (collection_id, document_id, ordinal, title, content, language) "
            "VALUES (%s, %s, 0, %s, %s, 'english')",
            (cid, doc, title, content),
        )
    rows = conn.execute(
        """
        SELECT d.external_id, ch.tsv::text
        FROM chunks ch JOIN documents d ON d.id = ch.document_id
        WHERE ch.tsv @@ websearch_to_tsquery('english', 'turbochargers')
        ORDER BY ts_rank(ch.tsv, websearch_to_tsquery('english', 'turbochargers')) DESC
        """
    ).fetchall()
    assert [r[0] for r in rows] == ["in-title", "in-body"]
    title_tsv = dict(rows)["in-title"]
    assert "'turbocharg':1A" in title_tsv  # stemmed, title position, weight A
    assert re.search(r"'replac':\d+B", title_tsv)  # body words carry weight B


def test_language_drives_stemming(conn: Conn) -> None:
    cid = _collection(conn, "indonesian")
    doc = _document(conn, cid, "id")
    conn.execute(
        "INSERT INTO chunks (collection_id, document_id, ordinal, title, content, language) "
        "VALUES (%s, %s, 0, 'Panduan', 'Pembelian mobil bekas', 'indonesian')",
        (cid, doc),
    )
    row = conn.execute(
        "SELECT count(*) FROM chunks WHERE tsv @@ websearch_to_tsquery('indonesian', 'beli')"
    ).fetchone()
    assert row == (1,)


def _explain(conn: Conn, statement: str, params: tuple[Any, ...]) -> str:
    rows = conn.execute(f"EXPLAIN (ANALYZE, BUFFERS) {statement}", params).fetchall()
    return "\n".join(str(r[0]) for r in rows)


def _bulk_chunks(conn: Conn, count: int) -> None:
    cid = _collection(conn)
    doc = _document(conn, cid, "bulk")
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((count, 384)).astype(np.float32)
    # Binary COPY sends a regconfig as its oid (same wire format).
    english = conn.execute("SELECT 'english'::regconfig::oid").fetchone()
    assert english is not None
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
    with conn.cursor().copy(
        "COPY chunks (collection_id, document_id, ordinal, title, content, language, embedding) "
        "FROM STDIN WITH (FORMAT BINARY)"
    ) as copy:
        copy.set_types(["int8", "int8", "int4", "text", "text", "oid", "vector"])
        for i in range(count):
            body = " ".join(words[(i + j) % len(words)] for j in range(3)) + f" item{i}"
            copy.write_row((cid, doc, i, f"Title {i}", body, english[0], vectors[i]))
    conn.execute("ANALYZE chunks")


def test_keyword_query_uses_gin_index(conn: Conn) -> None:
    _bulk_chunks(conn, 3000)
    plan = _explain(
        conn,
        "SELECT id FROM chunks WHERE tsv @@ websearch_to_tsquery('english', %s)",
        ("item1234",),
    )
    assert "chunks_tsv_idx" in plan, plan


def test_vector_order_by_limit_uses_hnsw_index(conn: Conn) -> None:
    _bulk_chunks(conn, 3000)
    query = np.random.default_rng(11).standard_normal(384).astype(np.float32)
    plan = _explain(
        conn,
        "SELECT id FROM chunks WHERE vector_dims(embedding) = 384 "
        "ORDER BY embedding::vector(384) <=> %s::vector(384) LIMIT 10",
        (query,),
    )
    assert "Index Scan using chunks_embedding_vector_384_idx" in plan, plan
