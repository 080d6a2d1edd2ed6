"""Every id a write accepts is addressed exactly by GET, PUT and DELETE, over HTTP and through
both clients; an id no URL path can carry is refused when written; and no single-document
request reaches the collection-wide delete (issue 37, item 1: `DELETE …/documents/%2F` emptied
the collection). Against a real `cari serve`, whose server gives the handlers the raw path."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from cari.client import CollectionCreate, DocumentIn, InvalidInputError, NotFoundError
from tests.test_client import connect

# Each must come back as itself: slashes kept, nothing decoded twice, no dot segment resolved.
IDS = ["x/", "a//b", "/lead", "..", ".", "a/../b", "%", "%2F", "50% off", "with space", "résumé/ß"]
# Ids of slashes only: a URL path cannot tell them from the collection's own routes.
SLASHES = ["/", "//"]


def _path(document_id: str) -> str:
    """The id as one path segment: every reserved character escaped, dots too (a client must
    not resolve '..' against the collection's URL)."""
    return quote(document_id, safe="").replace(".", "%2E")


@pytest.fixture
def http(base_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_url + "/v1/collections") as client:
        yield client


def _ids(http: httpx.Client, name: str) -> list[str]:
    response = http.get(f"/{name}/documents", params={"limit": 1000})
    assert response.status_code == 200, response.text
    return [d["id"] for d in response.json()["documents"]]


def test_http_addresses_every_accepted_id_exactly(http: httpx.Client) -> None:
    name = "ids-http"
    assert http.post("", json={"name": name}).status_code == 201
    batch = [{"id": i, "text": f"document {n}"} for n, i in enumerate([*IDS, *SLASHES, "k"])]
    added = http.post(f"/{name}/documents", json={"documents": batch}).json()
    assert [r["id"] for r in added["results"]] == [*IDS, "k"]
    assert [r["id"] for r in added["rejected"]] == SLASHES
    assert all("other than '/'" in r["reason"] for r in added["rejected"]), added["rejected"]
    assert sorted(_ids(http, name)) == sorted([*IDS, "k"])

    for document_id in IDS:
        url = f"/{name}/documents/{_path(document_id)}"
        got = http.get(url)
        assert got.status_code == 200 and got.json()["id"] == document_id, (document_id, got.text)
        put = http.put(url, json={"text": f"replaced {document_id}"})
        assert put.status_code == 200, (document_id, put.text)
        assert [(r["id"], r["status"]) for r in put.json()["results"]] == [(document_id, "updated")]
    assert sorted(_ids(http, name)) == sorted([*IDS, "k"])  # no PUT made a new document

    # A path of escaped slashes names a document, never the collection's documents.
    for escaped in ("%2F", "%2f", "%2F%2F"):
        deleted = http.delete(f"/{name}/documents/{escaped}")
        assert deleted.status_code == 404, (escaped, deleted.text)
        assert http.get(f"/{name}/documents/{escaped}").status_code == 404
    assert sorted(_ids(http, name)) == sorted([*IDS, "k"])
    put = http.put(f"/{name}/documents/%2F", json={"text": "slash"})
    assert put.status_code in (404, 405, 422), put.text
    assert "/" not in _ids(http, name)

    for document_id in IDS:
        deleted = http.delete(f"/{name}/documents/{_path(document_id)}")
        assert deleted.status_code == 204, (document_id, deleted.text)
        assert document_id not in _ids(http, name)
    assert _ids(http, name) == ["k"]
    # The collection-wide delete is its own route.
    assert http.delete(f"/{name}/documents").json() == {"deleted": 1}


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_client_addresses_every_accepted_id_exactly(kind: str, base_url: str) -> None:
    name = f"ids-{kind}"
    cari: Any
    for cari in connect(kind, base_url):
        cari.create_collection(CollectionCreate(name=name))
        cari.add_documents(name, [DocumentIn(id="k", text="bystander")])
        for document_id in IDS:
            put = cari.put_document(name, document_id, DocumentIn(text=f"about {document_id}"))
            assert [r.id for r in put.results] == [document_id]
            assert cari.get_document(name, document_id).id == document_id
        for document_id in SLASHES:
            with pytest.raises(InvalidInputError):
                cari.add_documents(name, [DocumentIn(id=document_id, text="slashes")])
            with pytest.raises(NotFoundError):
                cari.delete_document(name, document_id)
            with pytest.raises(NotFoundError):
                cari.get_document(name, document_id)
        assert sorted(d.id for d in cari.list_documents(name)) == sorted([*IDS, "k"])
        for document_id in IDS:
            cari.delete_document(name, document_id)
            with pytest.raises(NotFoundError):
                cari.get_document(name, document_id)
        assert [d.id for d in cari.list_documents(name)] == ["k"]
        assert cari.get_collection(name).name == name  # '..' never reached the collection
        assert cari.clear_documents(name).deleted == 1


def test_catalog_skus_are_exact_and_never_clear_the_catalog(http: httpx.Client) -> None:
    name = "ids-catalog"
    assert http.post("", json={"name": name}).status_code == 201
    items = [{"sku": sku, "name": f"item {sku}"} for sku in ("CIVIC/", "CIVIC", "a//b", "..")]
    assert http.post(f"/{name}/catalog", json=items).status_code == 200
    refused = http.post(f"/{name}/catalog", json=[{"sku": "/", "name": "slash"}])
    assert refused.status_code == 422 and "other than '/'" in refused.text, refused.text

    assert http.delete(f"/{name}/catalog/%2F").status_code == 404
    assert http.get(f"/{name}/catalog/%2F").status_code == 404
    for item in items:
        got = http.get(f"/{name}/catalog/{_path(item['sku'])}")
        assert got.status_code == 200 and got.json()["sku"] == item["sku"], (item, got.text)
    assert http.delete(f"/{name}/catalog/{_path('CIVIC/')}").status_code == 204
    listed = http.get(f"/{name}/catalog").json()
    assert sorted(i["sku"] for i in listed) == ["..", "CIVIC", "a//b"]
    assert http.delete(f"/{name}/catalog").json() == {"deleted": 3}
