"""GET /v1/collections/{collection}/documents: pages by cursor, filters by source and metadata,
on real PostgreSQL with the local fake embedder."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from litestar.testing import TestClient

from tests.conftest import app_client
from tests.fake_openai import FakeOpenAI

URL = "/v1/collections/kb/documents"


@pytest.fixture
def client(dsn: str, fake: FakeOpenAI) -> Iterator[TestClient[Any]]:
    with app_client(dsn, fake) as test_client:
        assert test_client.post("/v1/collections", json={"name": "kb"}).status_code == 201
        documents = [
            {
                "id": f"doc-{n:02d}",
                "title": f"Document {n}",
                "text": f"Paragraph number {n} about engines.\n\nA second paragraph {n}.",
                "source": "manuals" if n % 3 == 0 else "faq",
                "metadata": {"year": 2000 + n, "brand": "honda" if n % 2 else "bmw"},
            }
            for n in range(25)
        ]
        added = test_client.post(URL, json={"documents": documents})
        assert added.status_code == 200, added.text
        yield test_client


def pages(client: TestClient[Any], **params: Any) -> list[list[str]]:
    """Every page's ids, following `next_cursor` to the end."""
    seen: list[list[str]] = []
    cursor = None
    while True:
        query = {**params, **({"cursor": cursor} if cursor else {})}
        response = client.get(URL, params=query)
        assert response.status_code == 200, response.text
        body = response.json()
        seen.append([d["id"] for d in body["documents"]])
        cursor = body["next_cursor"]
        if cursor is None:
            return seen
        assert len(seen) < 100, "the cursor does not advance"


def test_pages_cover_every_document_once_in_id_order(client: TestClient[Any]) -> None:
    seen = pages(client, limit=10)
    assert [len(p) for p in seen] == [10, 10, 5]
    ids = [i for page in seen for i in page]
    assert ids == [f"doc-{n:02d}" for n in range(25)]


def test_an_exact_last_page_has_no_next_cursor(client: TestClient[Any]) -> None:
    assert [len(p) for p in pages(client, limit=5)] == [5, 5, 5, 5, 5]
    assert pages(client, limit=1000) == [[f"doc-{n:02d}" for n in range(25)]]


def test_a_summary_says_what_is_stored_without_the_chunks(client: TestClient[Any]) -> None:
    body = client.get(URL, params={"limit": 1}).json()
    (summary,) = body["documents"]
    assert summary["id"] == "doc-00"
    assert summary["title"] == "Document 0"
    assert summary["source"] == "manuals"
    assert summary["metadata"] == {"year": 2000, "brand": "bmw"}
    assert summary["chunks"] == len(client.get(f"{URL}/doc-00").json()["chunks"]) >= 1
    assert summary["content_hash"] and summary["created_at"] and summary["updated_at"]
    assert "content" not in summary


def test_filters_by_source_and_metadata(client: TestClient[Any]) -> None:
    manuals = [i for p in pages(client, source="manuals", limit=3) for i in p]
    assert manuals == [f"doc-{n:02d}" for n in range(0, 25, 3)]
    recent_hondas = json.dumps({"brand": "honda", "year": {"gte": 2015}})
    found = [i for p in pages(client, metadata=recent_hondas, limit=2) for i in p]
    assert found == [f"doc-{n:02d}" for n in range(15, 25, 2)]
    both = pages(client, metadata=json.dumps({"brand": {"in": ["bmw"]}}), source="manuals")
    assert both == [[f"doc-{n:02d}" for n in (0, 6, 12, 18, 24)]]


def test_a_deleted_document_leaves_the_next_page_intact(client: TestClient[Any]) -> None:
    first = client.get(URL, params={"limit": 10}).json()
    assert client.delete(f"{URL}/doc-09").status_code == 204
    assert client.delete(f"{URL}/doc-10").status_code == 204
    second = client.get(URL, params={"limit": 10, "cursor": first["next_cursor"]}).json()
    assert [d["id"] for d in second["documents"]][:2] == ["doc-11", "doc-12"]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"cursor": "not a cursor!"}, "cursor"),
        ({"cursor": ""}, "cursor"),
        ({"metadata": "{not json"}, "metadata"),
        ({"metadata": "[1, 2]"}, "metadata"),
        ({"metadata": json.dumps({"year": {"gt": 3}})}, "metadata.year"),
        ({"limit": 0}, "limit"),
        ({"limit": 1001}, "limit"),
    ],
)
def test_bad_parameters_are_4xx_naming_them(
    client: TestClient[Any], params: dict[str, Any], field: str
) -> None:
    response = client.get(URL, params=params)
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["code"] == "invalid_input"
    assert field in [error["field"] for error in problem["errors"]], problem


def test_an_unknown_collection_is_404(client: TestClient[Any]) -> None:
    response = client.get("/v1/collections/nope/documents")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found" and "nope" in response.json()["detail"]
