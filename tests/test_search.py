"""Search over HTTP on real PostgreSQL: the real local model where meaning matters, the
deterministic embedding fake where exact rankings or failures are asserted."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from litestar.testing import TestClient
from pgvector.psycopg import register_vector
from psycopg import sql

from cari.settings import LOCAL_EMBEDDING_DIMENSION as DIMENSION
from tests.conftest import app_client, cli_env
from tests.fake_openai import FakeOpenAI


def add(client: TestClient[Any], collection: str, documents: list[dict[str, Any]]) -> None:
    response = client.post(f"/v1/collections/{collection}/documents", json={"documents": documents})
    assert response.status_code == 200, response.text
    assert response.json()["rejected"] == []


def search(client: TestClient[Any], collection: str, **body: Any) -> dict[str, Any]:
    """A search: the top k ranked, no threshold unless given (these tests are about retrieval
    and ranking; tests/test_pipeline.py and tests/test_relevance.py cover the threshold)."""
    response = client.post(f"/v1/collections/{collection}/search", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def ids(response: dict[str, Any]) -> list[str]:
    return [r["document_id"] for r in response["results"]]


SHOP = [
    {"id": "kit", "title": "Gasket kit", "text": "Gasket kit SKU-9942-X for the pump."},
    {"id": "kit-y", "title": "Gasket kit", "text": "Gasket kit SKU-9942-Y for the pump."},
    {"id": "kit-z", "title": "Gasket kit", "text": "Gasket kit SKU-9924-X for the pump."},
    {"id": "seal", "title": "Pump seal", "text": "A mechanical seal for water pumps, model PS-12."},
    {
        "id": "battery",
        "title": "Winter care",
        "text": "The automobile's battery must be recharged.",
    },
    {"id": "museum", "title": "Visiting", "text": "The museum opens at nine in the morning."},
    {"id": "recipe", "title": "Dinner", "text": "Fried rice is cooked with soy sauce."},
]


@pytest.fixture(scope="module")
def shop(module_dsn: str) -> Iterator[TestClient[Any]]:
    """A collection embedded once by the real local model, shared by the read-only tests."""
    with app_client(module_dsn) as client:
        client.post("/v1/collections", json={"name": "shop", "language": "english"})
        add(client, "shop", SHOP)
        yield client


def test_exact_sku_ranks_first_in_hybrid(shop: TestClient[Any]) -> None:
    response = search(shop, "shop", query="SKU-9942-X", explain=True)
    assert ids(response)[0] == "kit"
    assert response["signal"] == "exact_token"
    explain = response["explain"]
    assert explain["weights"] == {"keyword": 2.0, "vector": 0.5}
    assert explain["signal"]["exact_tokens"][0]["text"] == "SKU-9942-X"
    top = response["results"][0]["retrievers"]
    assert top["keyword"]["rank"] == 1
    # BM25 ranks the exact code first; the near codes share parts of it ("sku", "9942", "x").
    keyword = search(shop, "shop", query="SKU-9942-X", mode="keyword")
    assert ids(keyword)[0] == "kit"
    assert sorted(ids(keyword)[1:]) == ["kit-y", "kit-z"]
    scores = [r["retrievers"]["keyword"]["score"] for r in keyword["results"]]
    assert scores[0] > 1.5 * scores[1]


def test_paraphrase_found_by_vector_and_hybrid_not_keyword(shop: TestClient[Any]) -> None:
    question = "how often should I charge the car accumulator?"
    assert ids(search(shop, "shop", query=question, mode="keyword")) == []
    assert ids(search(shop, "shop", query=question, mode="vector"))[0] == "battery"
    assert ids(search(shop, "shop", query=question))[0] == "battery"


@pytest.mark.parametrize("fusion", ["rrf", "minmax", "zscore"])
def test_every_fusion_keeps_exact_tokens_first_and_finds_paraphrases(
    shop: TestClient[Any], fusion: str
) -> None:
    response = search(shop, "shop", query="SKU-9942-X", fusion=fusion, explain=True)
    assert ids(response)[0] == "kit"
    assert response["explain"]["fusion"] == fusion
    assert response["explain"]["weights"] == {"keyword": 2.0, "vector": 0.5}
    question = "how often should I charge the car accumulator?"
    assert ids(search(shop, "shop", query=question, fusion=fusion))[0] == "battery"


def test_collection_fusion_is_the_default_and_a_request_overrides_it(
    dsn: str, fake: FakeOpenAI
) -> None:
    with app_client(dsn, fake) as client:
        created = client.post("/v1/collections", json={"name": "f", "fusion": "minmax"})
        assert created.status_code == 201, created.text
        assert created.json()["fusion"] == "minmax"
        add(client, "f", [{"id": "a", "text": "alpha beta"}, {"id": "b", "text": "gamma"}])
        assert search(client, "f", query="alpha", explain=True)["explain"]["fusion"] == "minmax"
        # Min-max scores are a weighted mean of values in 0..1: "a" tops the keyword list.
        convex = search(client, "f", query="alpha", explain=True)
        assert ids(convex)[0] == "a"
        assert all(0.0 <= r["score"] <= 1.0 for r in convex["results"])
        changed = client.patch("/v1/collections/f", json={"fusion": "zscore"})
        assert changed.json()["fusion"] == "zscore"
        assert search(client, "f", query="alpha", explain=True)["explain"]["fusion"] == "zscore"
        response = search(client, "f", query="alpha", fusion="rrf", explain=True)
        assert response["explain"]["fusion"] == "rrf"
        bad = client.patch("/v1/collections/f", json={"fusion": "borda"})
        assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "fusion"


def test_indonesian_question_finds_english_passage(shop: TestClient[Any]) -> None:
    response = search(shop, "shop", query="jam berapa museum buka?")
    assert ids(response)[0] == "museum"
    assert ids(search(shop, "shop", query="cara memasak nasi goreng"))[0] == "recipe"


def test_explain_shows_a_weak_short_keyword_list_weighing_less(shop: TestClient[Any]) -> None:
    """One of two words found once, in one of seven documents: the keyword list is short and
    its match weak, so it was fused at less than its planned weight; the vector side's stays."""
    explain = search(shop, "shop", query="morning battery", explain=True)["explain"]
    fused = explain["sub_queries"][0]["weights"]
    assert explain["sub_queries"][0]["candidates"]["keyword"] < 7
    assert fused["vector"] == explain["weights"]["vector"]
    assert 0 < fused["keyword"] < explain["weights"]["keyword"]


def test_explain_reports_plan_and_timings(shop: TestClient[Any]) -> None:
    response = search(shop, "shop", query="water pump seal", explain=True, ef_search=77, top_k=3)
    explain = response["explain"]
    assert explain["mode"] == "hybrid"
    # read inside the query
    assert explain["ef_search"] == {"requested": 77, "applied": "77", "source": "request"}
    assert explain["top_k"] == 3 and len(response["results"]) <= 3
    assert set(explain["timings_ms"]) >= {"embed", "keyword", "vector", "fuse", "total"}
    again = search(shop, "shop", query="water pump seal", explain=True)
    assert again["explain"]["query_vector_cached"] is True
    for result in response["results"]:
        assert result["content"] and result["title"]
        assert set(result["retrievers"]) <= {"keyword", "vector"}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": ""}, "query"),
        ({"query": "   \n\t"}, "query"),
        ({"query": "x" * 4001}, "query"),
        ({"query": "pump", "top_k": 0}, "top_k"),
        ({"query": "pump", "top_k": 51}, "top_k"),
        ({"query": "pump", "vector_weight": -1}, "vector_weight"),
        ({"query": "pump", "mode": "fuzzy"}, "mode"),
        ({"query": "pump", "fusion": "borda"}, "fusion"),
        ({"query": "pump", "candidates": 1001}, "candidates"),
        ({"query": "pump", "threshold": 1.5}, "threshold"),
        ({"query": "pump", "threshold": -0.1}, "threshold"),
        ({"query": "pump", "decompose": "yes"}, "decompose"),
        ({"query": "pump", "filters": {"metadata": {"year": {"gt": 3}}}}, "filters"),
        ({"query": "pump", "filters": {"colour": 1}}, "filters"),
    ],
)
def test_bad_search_input_names_the_field(
    shop: TestClient[Any], body: dict[str, Any], field: str
) -> None:
    response = shop.post("/v1/collections/shop/search", json=body)
    assert response.status_code == 422, response.text
    # Cari names a nested field by its path (filters.metadata.year)
    assert [error["field"].split(".")[0] for error in response.json()["errors"]] == [field]


def test_separator_lines_and_nul_paths_are_not_errors(shop: TestClient[Any]) -> None:
    pasted = "gasket kit\n" + "-" * 40 + "\n- - - " * 20
    for mode in ("keyword", "hybrid"):
        assert (
            shop.post(
                "/v1/collections/shop/search", json={"query": pasted, "mode": mode}
            ).status_code
            == 200
        )
    assert shop.post("/v1/collections/sh%00op/search", json={"query": "x"}).status_code == 422
    too_many = {"metadata": {f"k{i}": {"gte": 1} for i in range(65)}}
    response = shop.post("/v1/collections/shop/search", json={"query": "x", "filters": too_many})
    assert response.status_code == 422


def test_unknown_collection_is_404(shop: TestClient[Any]) -> None:
    assert shop.post("/v1/collections/none/search", json={"query": "x"}).status_code == 404


@pytest.fixture
def catalog(dsn: str, fake: FakeOpenAI) -> Iterator[TestClient[Any]]:
    with app_client(dsn, fake) as client:
        client.post("/v1/collections", json={"name": "cars", "language": "indonesian"})
        add(
            client,
            "cars",
            [
                {
                    "id": f"car-{i}",
                    "text": f"Mobil nomor {i} dengan mesin bensin.",
                    "metadata": {"brand": brand, "year": year, "sold": f"2024-0{1 + i % 9}-15"},
                }
                for i, (brand, year) in enumerate(
                    [
                        ("honda", 2020),
                        ("honda", 2023),
                        ("toyota", 2021),
                        ("toyota", 2024),
                        ("suzuki", 2019),
                        ("honda", 2024),
                    ]
                )
            ],
        )
        yield client


def test_filters_narrow_results(catalog: TestClient[Any]) -> None:
    def found(filters: dict[str, Any], mode: str = "hybrid") -> list[str]:
        response = search(
            catalog, "cars", query="mobil bensin", filters=filters, top_k=50, mode=mode
        )
        return sorted(ids(response))

    assert found({"metadata": {"brand": "honda"}}) == ["car-0", "car-1", "car-5"]
    assert found({"metadata": {"brand": {"in": ["toyota", "suzuki"]}}}) == [
        "car-2",
        "car-3",
        "car-4",
    ]
    assert found({"metadata": {"year": {"gte": 2021, "lte": 2023}}}) == ["car-1", "car-2"]
    assert found({"metadata": {"brand": "honda", "year": {"gte": 2024}}}, "vector") == ["car-5"]
    assert found({"metadata": {"sold": {"gte": "2024-05-01"}}}, "keyword") == ["car-4", "car-5"]
    assert found({"document_ids": ["car-3", "nope"]}) == ["car-3"]


def test_exact_token_wins_even_when_vector_misses(catalog: TestClient[Any]) -> None:
    add(catalog, "cars", [{"id": "part", "text": "Filter oli kode SKU-7781-B untuk Honda."}])
    # The fake's vectors are random: the vector ranking is noise, keyword finds the code.
    response = search(catalog, "cars", query="SKU-7781-B", explain=True)
    assert ids(response)[0] == "part"
    assert response["explain"]["signal"]["name"] == "exact_token"


def test_updates_and_deletes_are_visible_to_the_next_search(catalog: TestClient[Any]) -> None:
    assert ids(search(catalog, "cars", query="listrik", mode="keyword")) == []
    catalog.put("/v1/collections/cars/documents/car-0", json={"text": "Mobil listrik baru."})
    assert ids(search(catalog, "cars", query="listrik", mode="keyword")) == ["car-0"]
    assert "car-0" not in ids(search(catalog, "cars", query="bensin", mode="keyword", top_k=50))
    assert "car-0" in ids(search(catalog, "cars", query="listrik", mode="vector", top_k=50))
    catalog.delete("/v1/collections/cars/documents/car-0")
    assert ids(search(catalog, "cars", query="listrik", mode="keyword")) == []
    assert "car-0" not in ids(search(catalog, "cars", query="listrik", top_k=50))


def test_embedder_outage_degrades_hybrid_and_fails_vector(
    catalog: TestClient[Any], fake: FakeOpenAI
) -> None:
    fake.fail(503, "down for maintenance", times=None)
    response = search(catalog, "cars", query="mobil bensin")
    assert response["degraded"] == ["vector"]
    assert "down for maintenance" in response["warnings"][0]
    assert response["results"] and all(
        set(r["retrievers"]) == {"keyword"} for r in response["results"]
    )
    vector = catalog.post("/v1/collections/cars/search", json={"query": "mobil", "mode": "vector"})
    assert vector.status_code == 503
    assert "down for maintenance" in vector.json()["detail"]


def test_selective_filter_still_returns_top_k(dsn: str, fake: FakeOpenAI) -> None:
    """Few rows pass the filter: the HNSW scan keeps going until top_k of them are found."""
    with app_client(dsn, fake) as client:
        client.post("/v1/collections", json={"name": "mixed"})
        keep = [
            {"id": f"k{i}", "text": f"kept item {i}", "metadata": {"tag": "keep"}} for i in range(8)
        ]
        add(client, "mixed", keep)
    query_vector = _bulk_rows(dsn, "mixed", 3000)
    # Make the planner take the HNSW index even for this selective filter, as it does when
    # its estimate is off; an exact scan would hide the problem.
    with psycopg.connect(dsn, autocommit=True) as conn:
        name = conn.info.dbname
        conn.execute(
            sql.SQL("ALTER DATABASE {} SET enable_seqscan = off").format(sql.Identifier(name))
        )
    with app_client(dsn, fake) as client:
        response = search(
            client,
            "mixed",
            query="anything",
            mode="vector",
            top_k=5,
            ef_search=10,
            filters={"metadata": {"tag": "keep"}},
        )
    assert len(response["results"]) == 5
    assert all(r["metadata"]["tag"] == "keep" for r in response["results"])

    # The control: the same HNSW scan without iterative scans finds fewer than top_k.
    with psycopg.connect(dsn) as conn:
        register_vector(conn)
        conn.execute("SET hnsw.ef_search = 10")
        filtered = (
            'SELECT id FROM chunks WHERE metadata @> \'{"tag": "keep"}\' '
            "AND vector_dims(embedding) = 384 "
            "ORDER BY embedding::vector(384) <=> %s::vector(384) LIMIT 5"
        )
        plan = conn.execute("EXPLAIN " + filtered, (query_vector,)).fetchall()
        assert "chunks_embedding_vector_384_idx" in str(plan)
        assert len(conn.execute(filtered, (query_vector,)).fetchall()) < 5


def _bulk_rows(dsn: str, collection: str, count: int) -> np.ndarray:
    """`count` chunks tagged "no" with random vectors; returns one more random vector."""
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((count + 1, DIMENSION)).astype(np.float32)
    with psycopg.connect(dsn) as conn:
        register_vector(conn)
        row = conn.execute(
            "INSERT INTO documents (collection_id, external_id, content_hash) "
            "SELECT id, 'bulk', '' FROM collections WHERE name = %s RETURNING collection_id, id",
            (collection,),
        ).fetchone()
        assert row is not None
        with conn.cursor().copy(
            "COPY chunks (collection_id, document_id, ordinal, content, language, metadata, "
            "embedding) FROM STDIN"
        ) as copy:
            for i in range(count):
                copy.write_row(
                    (row[0], row[1], i, f"bulk {i}", "simple", '{"tag": "no"}', vectors[i])
                )
        conn.execute("ANALYZE chunks")
    return vectors[count]


@given(
    query=st.one_of(
        st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=200),
        st.text(alphabet="&|!():*'\"\\-<>~%_;", min_size=1, max_size=40),
        st.sampled_from(
            [
                "'; DROP TABLE chunks; --",
                "a & | b",
                "!!!",
                "(((",
                '"unclosed',
                "😀🚗",
                "*:*",
                "SELECT * FROM pg_user",
                "-",
                "OR",
                "\u0000x",
            ]
        ),
    ),
    mode=st.sampled_from(["hybrid", "keyword"]),
)
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_any_query_text_returns_results_or_nothing(
    catalog: TestClient[Any], query: str, mode: str
) -> None:
    response = catalog.post("/v1/collections/cars/search", json={"query": query, "mode": mode})
    if query.replace("\x00", " ").strip():
        assert response.status_code == 200, response.text
        assert isinstance(response.json()["results"], list)
    else:
        assert response.status_code == 422


def test_cli_search_prints_a_table_and_json(
    dsn: str, fake: FakeOpenAI, clean_env: dict[str, str]
) -> None:
    import json
    import subprocess
    import sys

    with app_client(dsn, fake) as client:
        client.post("/v1/collections", json={"name": "cli", "language": "english"})
        one = {"id": "one", "title": "Harbour", "text": "Boats moor here.", "source": "guide.md"}
        add(client, "cli", [one])
    env = cli_env(clean_env, dsn, fake)
    base = [sys.executable, "-m", "cari.cli", "search", "boats", "-c", "cli"]

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*base, *args], env=env, capture_output=True, text=True, check=False)

    table = cli()
    assert table.returncode == 0, table.stderr
    assert "one" in table.stdout and "Harbour" in table.stdout
    assert "Boats moor here." in table.stdout  # the highlight, its marks as bold (no tty: none)
    assert "guide.md" in table.stdout  # the "source" column: the document's source, not its id
    # The plan as tables, as the README promises, not the response's JSON.
    explained = cli("--explain", "--mode", "keyword", "--threshold", "0")
    assert explained.returncode == 0, explained.stderr
    assert '"served_by"' not in explained.stdout and "{" not in explained.stdout
    for shown in ("served by", "primary", "fusion", "threshold", "keyword", "timings (ms)"):
        assert shown in explained.stdout, (shown, explained.stdout)
    chunk = re.search(r"chunk:\d+", explained.stdout)  # each weighed chunk, with its evidence
    assert chunk is not None and "coverage" in explained.stdout, explained.stdout
    # The decomposition in words, and one sub-query's timings once (they are the search's).
    assert "searched whole: nothing to split" in explained.stdout, explained.stdout
    assert "pattern -" not in explained.stdout and "kept whole because" not in explained.stdout
    assert explained.stdout.count("timings (ms)") == 1, explained.stdout
    split = subprocess.run(
        [*base[:4], "boats vs harbours", *base[5:], "--explain", "--mode", "keyword"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert 'split by "vs" into: boats; harbours' in split.stdout, split.stdout
    assert split.stdout.count("timings (ms)") == 3, split.stdout  # each sub-query's, the total
    raw = cli("--json", "--explain", "--mode", "keyword")
    response = json.loads(raw.stdout)
    assert [r["document_id"] for r in response["results"]] == ["one"]
    assert response["results"][0]["highlight"] == "<mark>Boats</mark> moor here."
    assert response["explain"]["mode"] == "keyword"
    fused = cli("--json", "--explain", "--fusion", "zscore")
    assert json.loads(fused.stdout)["explain"]["fusion"] == "zscore"
    # A misspelled question: the text its vector search embedded, respelled.
    base[4] = "baots"
    respelled = cli("--explain", "--threshold", "0")
    assert "embedded query: boats" in respelled.stdout, respelled.stdout
    assert "embedded query" not in explained.stdout  # as typed: not repeated
    missing = subprocess.run(
        [sys.executable, "-m", "cari.cli", "search", " ", "-c", "cli"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert missing.returncode == 1
    assert missing.stderr.strip() == "Error: query: is empty"


def test_defaults_rank_exact_tokens_strong_and_off_topic_weak(shop: TestClient[Any]) -> None:
    """At the defaults, with the real model: the SKU's chunk holds every word of the question,
    words few other chunks hold, so it is a strong match whatever its cosine; a question about
    nothing here gets the closest chunks, each weak, and nothing once the collection's
    threshold (0.25) is asked for."""
    found = shop.post("/v1/collections/shop/search", json={"query": "SKU-9942-X"}).json()
    assert ids(found)[0] == "kit"
    assert found["results"][0]["band"] == "strong"
    body = {"query": "who won the football world cup in 1998?"}
    ranked = shop.post("/v1/collections/shop/search", json=body).json()["results"]
    assert ranked and all(r["band"] == "weak" for r in ranked)
    cut = shop.post("/v1/collections/shop/search", json={**body, "threshold": 0.25}).json()
    assert cut["results"] == []
