"""The relevance scale and the threshold rule, and the evidence as PostgreSQL computes it."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest
from litestar.testing import TestClient

from cari.search.relevance import (
    COVERAGE_CENTRE,
    COVERAGE_LIFT,
    Evidence,
    Scale,
    band,
    evidence,
    keep,
)
from tests.conftest import app_client
from tests.fake_openai import FakeOpenAI

SCALE = Scale(cosine_floor=0.8, cosine_ceiling=0.98)
CENTRE = COVERAGE_CENTRE  # the coverage at which the cosine is read as it is
LIFT = COVERAGE_LIFT * 0.18  # the cosine read higher per unit of coverage on SCALE
RARE = 50.0  # specificity: words that no other chunk would hold by chance


@pytest.mark.parametrize(
    ("cosine", "coverage", "expected"),
    [
        (0.80, CENTRE, 0.1),  # the floor
        (0.845, CENTRE, 0.25),  # a quarter of the way: the default answer threshold
        (0.89, CENTRE, 0.5),  # halfway
        (0.935, CENTRE, 0.75),
        (0.98, CENTRE, 0.9),  # the ceiling
        (0.845 - LIFT * (0.5 - CENTRE), 0.5, 0.25),  # half the words: read closer
        (0.845 + LIFT * CENTRE, 0.0, 0.25),  # none of them: read further
        (None, 0.7, 0.25),  # keyword mode: coverage alone
        (None, 0.8, 0.5),
        (None, 1.0, 0.9),  # every query word, e.g. a SKU the embedder does not know
        (0.89 - LIFT * (0.7 - CENTRE), 0.7, 0.5),  # the larger of the two
        (0.70, 1.0, 0.9),
    ],
)
def test_scale(cosine: float | None, coverage: float, expected: float) -> None:
    assert SCALE.relevance(Evidence(cosine, coverage, RARE)) == pytest.approx(expected, abs=1e-9)


def test_the_cosine_is_read_with_the_word_coverage_beside_it() -> None:
    """More of the question's words never lower a chunk's relevance, and they count below the
    lexical curve's reach: a short record holding half of them reads as a closer passage."""
    coverages = [i / 100 for i in range(101)]
    dense = [SCALE.dense(Evidence(0.84, c, RARE)) for c in coverages]
    assert all(a < b for a, b in pairwise(dense))
    half = SCALE.relevance(Evidence(0.84, 0.5, RARE))
    assert SCALE.relevance(Evidence(0.84, 0.0, RARE)) < 0.25 < half  # lexical alone: 0.04
    assert (
        SCALE.relevance(Evidence(0.84, 0.5, RARE), lift=0.0) < 0.25
    )  # the cosine alone refused it
    assert SCALE.dense(Evidence(None, 1.0, RARE)) == 0.0  # keyword mode: no cosine to read


def test_no_evidence_is_a_gate_every_piece_counts_smoothly() -> None:
    """Coverage 0.59 was under the 0.6 floor, so relevance 0, however many of the question's
    words the chunk held; a cosine under the floor was 0 too. Now both only lower it, and more
    evidence never lowers it."""
    assert SCALE.relevance(Evidence(None, 0.59, RARE)) == pytest.approx(0.0905, abs=1e-4)
    assert (
        0
        < SCALE.relevance(Evidence(0.5, 0.0, RARE))
        < SCALE.relevance(Evidence(0.79, 0.0, RARE))
        < 0.1
    )
    coverages = [i / 100 for i in range(101)]
    lexical = [SCALE.relevance(Evidence(None, c, RARE)) for c in coverages]
    assert all(0 < a < b < 1 for a, b in pairwise(lexical))
    cosines = [0.6 + i / 250 for i in range(101)]
    dense = [SCALE.relevance(Evidence(c, 0.0, RARE)) for c in cosines]
    assert all(a < b for a, b in pairwise(dense))
    # Neighbouring evidence gives neighbouring relevance: no step anywhere.
    assert max(b - a for a, b in pairwise(lexical)) < 0.03
    # Either piece of evidence alone may make a chunk relevant; both never make it less so.
    assert SCALE.relevance(Evidence(0.845, 0.7, RARE)) >= 0.25
    at_quarter = Evidence(0.845 - LIFT * (0.7 - CENTRE), 0.7, RARE)  # each curve reads 0.25
    assert SCALE.relevance(at_quarter, "either") == pytest.approx(1 - 0.75 * 0.75)


@pytest.mark.parametrize(
    ("relevance", "expected"),
    [(1.0, "strong"), (0.5, "strong"), (0.4999, "moderate"), (0.3, "moderate"),
     (0.2999, "weak"), (0.0, "weak")],
)  # fmt: skip
def test_bands(relevance: float, expected: str) -> None:
    assert band(relevance) == expected


def test_keep_needs_one_strong_chunk_then_half_the_threshold() -> None:
    assert keep([0.2, 0.15, 0.1], 0.25) == [False, False, False]  # off-topic: nothing
    assert keep([0.3, 0.15, 0.1], 0.25) == [True, True, False]
    assert keep([0.1, 0.3], 0.25) == [False, True]  # the strong one need not rank first
    assert keep([0.0], 0.0) == [True]  # threshold 0 keeps everything
    assert keep([], 0.25) == []


def coverage(client: TestClient[Any], collection: str, query: str) -> dict[str, float]:
    """Each result's term coverage by document id, from the search's explain output."""
    body: dict[str, Any] = {"query": query, "threshold": 0, "explain": True, "top_k": 20}
    response = client.post(f"/v1/collections/{collection}/search", json=body).json()
    by_chunk = {k["id"]: k["coverage"] for k in response["explain"]["sub_queries"][0]["kept"]}
    return {r["document_id"]: by_chunk[r["id"]] for r in response["results"]}


def test_coverage_weighs_rare_words_and_unknown_ones(dsn: str, fake: FakeOpenAI) -> None:
    documents = [
        {"id": "both", "text": "alpha beta"},
        {"id": "alpha", "text": "alpha common"},
        *({"id": f"filler-{i}", "text": f"common word {i}"} for i in range(8)),
    ]
    with app_client(dsn, fake) as client:
        client.post("/v1/collections", json={"name": "c"})
        client.post("/v1/collections/c/documents", json={"documents": documents})
        found = coverage(client, "c", "alpha beta")
        assert found["both"] == 1.0
        # alpha and beta are equally rare (each in one or two chunks): about half each.
        assert 0.4 < found["alpha"] < 0.6
        # "common" is in 9 of 10 chunks: holding it counts for little next to "beta".
        assert coverage(client, "c", "common beta")["alpha"] < 0.1
        # A word the collection has never seen weighs more than any it holds (df 0). N = 10:
        # idf(beta, df 1) = ln(1 + 9.5 / 1.5) = 1.9924; idf(df 0) = ln(1 + 10.5 / 0.5) = 3.0910;
        # 1.9924 / (1.9924 + 3.0910) = 0.3919.
        assert coverage(client, "c", "beta zyzzyva")["both"] == pytest.approx(0.3919, abs=0.0001)
        # Said twice, beta weighs as keyword search weighs it: 2·1001/1002 times its idf.
        twice = 2 * 1001 / 1002 * 1.9924
        assert coverage(client, "c", "beta beta zyzzyva")["both"] == pytest.approx(
            twice / (twice + 3.0910), abs=0.0001
        )


def test_coverage_leaves_out_query_stop_words(dsn: str, fake: FakeOpenAI) -> None:
    """An Indonesian question word is no part of what the question asks about: a chunk naming
    everything else covers the whole question (it was ~0.4, "siapa" weighing as unseen)."""
    documents = [
        {"id": "answer", "text": "Soekarno memproklamasikan kemerdekaan"},
        *({"id": f"filler-{i}", "text": f"kota {i} di pulau Jawa"} for i in range(8)),
    ]
    with app_client(dsn, fake) as client:
        client.post("/v1/collections", json={"name": "c", "language": "indonesian"})
        client.post("/v1/collections/c/documents", json={"documents": documents})
        found = coverage(client, "c", "Siapakah Soekarno?")
    assert found["answer"] == 1.0


REFUNDS = (
    "Refunds: you may return an item within 30 days of delivery. The money is paid back to "
    "the card you paid with within five working days of the return reaching our warehouse."
)


def test_search_ranks_and_answers_refuse(dsn: str) -> None:
    """The issue's first case, with the real model: "refund window" on a one-document
    collection about refunds returned nothing (the global scale's cut; a collection this small
    gets no fit). A search now returns the top k ranked, each with its band; a threshold asked
    for still cuts; an answer applies the collection's threshold and refuses what is off-topic
    with its no-information sentence."""
    with app_client(dsn) as client:
        client.post("/v1/collections", json={"name": "refunds", "language": "english"})
        added = client.post(
            "/v1/collections/refunds/documents",
            json={"documents": [{"id": "refunds", "title": "Refunds", "text": REFUNDS}]},
        )
        assert added.status_code == 200, added.text

        def search(**body: Any) -> dict[str, Any]:
            response = client.post("/v1/collections/refunds/search", json=body)
            assert response.status_code == 200, response.text
            found: dict[str, Any] = response.json()
            return found

        found = search(query="refund window", explain=True)
        (result,) = found["results"]
        assert result["document_id"] == "refunds"
        assert 0 < result["relevance"] < 1
        assert result["band"] == band(result["relevance"])
        assert found["explain"]["threshold"] is None
        (kept,) = found["explain"]["sub_queries"][0]["kept"]
        assert kept["band"] == result["band"] and "lexical" in kept
        # The cosine is read with the word coverage beside it: every word held lifts it.
        worded = search(query="return an item within days", explain=True)["explain"]
        (held,) = worded["sub_queries"][0]["kept"]
        shown = worded["relevance_scale"]
        scale = Scale(shown["cosine_floor"], shown["cosine_ceiling"])
        read = Evidence(held["cosine"], held["coverage"], held["specificity"])
        assert held["coverage"] == 1.0
        assert held["dense"] == pytest.approx(scale.dense(read), abs=1e-3)
        assert held["dense"] > scale.dense(read, lift=0.0) + 0.05
        assert held["relevance"] == pytest.approx(scale.relevance(read), abs=1e-3)
        # An off-topic question is ranked too, and its band says what it is worth.
        (other,) = search(query="Who painted the ceiling of the Sistine Chapel?")["results"]
        assert other["band"] == "weak" and other["relevance"] < 0.25
        # A threshold asked for cuts as before: nothing unless a chunk reaches it.
        cut = search(query="Who painted the ceiling of the Sistine Chapel?", threshold=0.25)
        assert cut["results"] == []
        assert search(query="refund window", threshold=0)["results"]

        def answer(question: str) -> dict[str, Any]:
            response = client.post("/v1/collections/refunds/answer", json={"query": question})
            assert response.status_code == 200, response.text
            found: dict[str, Any] = response.json()
            return found

        refused = answer("Who painted the ceiling of the Sistine Chapel?")
        assert refused["no_information"] is True and refused["sources"] == []
        answered = answer("How many days do I have to return an item for a refund?")
        assert answered["no_information"] is False
        assert [s["result"]["document_id"] for s in answered["sources"]] == ["refunds"]


def test_a_collection_may_set_a_search_threshold(dsn: str, fake: FakeOpenAI) -> None:
    """`search_threshold` (null by default) cuts a collection's searches when a user sets it;
    a request's threshold wins; answers keep the collection's `threshold`."""
    documents = [{"id": f"d{i}", "text": f"pump model {i} manual"} for i in range(3)]
    with app_client(dsn, fake) as client:
        created = client.post("/v1/collections", json={"name": "c"}).json()
        assert (created["threshold"], created["search_threshold"]) == (0.25, None)
        client.post("/v1/collections/c/documents", json={"documents": documents})
        body = {"query": "pump", "mode": "keyword", "explain": True}
        ranked = client.post("/v1/collections/c/search", json=body).json()
        assert len(ranked["results"]) == 3 and ranked["explain"]["threshold"] is None
        changed = client.patch("/v1/collections/c", json={"search_threshold": 0.99})
        assert changed.json()["search_threshold"] == 0.99
        assert changed.json()["threshold"] == 0.25
        cut = client.post("/v1/collections/c/search", json=body).json()
        assert cut["results"] == [] and cut["explain"]["threshold"] == 0.99
        asked = client.post("/v1/collections/c/search", json={**body, "threshold": 0}).json()
        assert len(asked["results"]) == 3
        # Unchanged by another field's change; null puts the default back.
        client.patch("/v1/collections/c", json={"top_k": 4})
        assert client.get("/v1/collections/c").json()["search_threshold"] == 0.99
        cleared = client.patch("/v1/collections/c", json={"search_threshold": None})
        assert cleared.json()["search_threshold"] is None
        bad = client.patch("/v1/collections/c", json={"search_threshold": 1.5})
        assert bad.status_code == 422


def test_only_what_a_search_returns_is_weighed(
    dsn: str, fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a threshold a search returns its top k whatever their relevance, so only they
    are weighed; a threshold may drop weighed chunks for the next ones, so twice as many are
    (at least 10)."""
    weighed: list[int] = []

    async def counted(conn: Any, collection_id: int, asked: Any, vector: Any, ids: Any) -> Any:
        weighed.append(len(ids))
        return await evidence(conn, collection_id, asked, vector, ids)

    monkeypatch.setattr("cari.search.relevance.evidence", counted)
    documents = [{"id": f"pump-{i}", "text": f"Pump {i} moves water."} for i in range(30)]
    with app_client(dsn, fake) as client:
        client.post("/v1/collections", json={"name": "c"})
        client.post("/v1/collections/c/documents", json={"documents": documents})
        for body, expected in [
            ({"top_k": 3}, 3),
            ({"top_k": 3, "threshold": 0}, 10),
            ({"top_k": 8, "threshold": 0}, 16),
        ]:
            weighed.clear()
            found = client.post(
                "/v1/collections/c/search", json={"query": "pump", "mode": "keyword", **body}
            ).json()
            assert len(found["results"]) == body["top_k"]
            assert weighed == [expected]


def test_a_question_whose_words_a_document_mostly_holds_is_found(
    dsn: str, fake: FakeOpenAI
) -> None:
    """The issue's second case: a keyword search for "berapa lama garansi mesin mobil?" came
    back empty although a document holds garansi, mesin and mobil: its word coverage was under
    the 0.6 floor, so its relevance 0. Now it is returned, its relevance above 0 and growing
    with its coverage."""
    documents = [
        {"id": "garansi", "text": "Garansi mesin mobil baru berlaku untuk setiap pembelian."},
        *({"id": f"mobil-{i}", "text": f"Mobil {i} dijual di dealer resmi."} for i in range(4)),
        {"id": "mesin", "text": "Mesin bensin perlu servis berkala."},
    ]  # "lama" is in none: a word the collection never saw weighs most
    with app_client(dsn, fake) as client:
        client.post("/v1/collections", json={"name": "c", "language": "indonesian"})
        client.post("/v1/collections/c/documents", json={"documents": documents})
        body = {"query": "berapa lama garansi mesin mobil?", "mode": "keyword", "explain": True}
        found = client.post("/v1/collections/c/search", json=body).json()
    weighed = {k["id"]: k for k in found["explain"]["sub_queries"][0]["kept"]}
    by_document = {r["document_id"]: weighed[r["id"]] for r in found["results"]}
    evidence = by_document["garansi"]
    assert 0.3 < evidence["coverage"] < 0.6  # most of the question's words, under the old floor
    assert evidence["relevance"] > 0 and evidence["relevance"] == evidence["lexical"]
    assert evidence["band"] == "weak"


def test_openapi_shows_the_band_and_the_search_threshold(dsn: str, fake: FakeOpenAI) -> None:
    with app_client(dsn, fake) as client:
        schemas = client.get("/docs/openapi.json").json()["components"]["schemas"]
    result = schemas["SearchResult"]
    assert "band" in result["required"]
    assert result["properties"]["band"]["enum"] == ["strong", "moderate", "weak"]
    created = schemas["CollectionCreate"]["properties"]["search_threshold"]
    assert "null" in str(created) and "top k ranked" in str(created)


def test_words_that_many_chunks_hold_are_not_strong_evidence(dsn: str, fake: FakeOpenAI) -> None:
    """Issue 62's seventh finding: "how do I back up the database?" on the docs showed all five
    results `0.9 strong`, a chunk about pool metrics among them: each held both words, and the
    coverage curve read only the share of the question's words held, not how common they are.
    Words every chunk holds now read weak; a word only one chunk holds still reads strong."""
    documents = [
        {
            "id": f"topic-{i}",
            "text": f"Notes on topic {i}: the database comes back after a restart.",
        }
        for i in range(24)
    ]
    documents.append({"id": "dump", "text": "Run cari db dump to back up the database."})
    with app_client(dsn, fake) as client:
        client.post("/v1/collections", json={"name": "c", "language": "english"})
        client.post("/v1/collections/c/documents", json={"documents": documents})

        def weighed(question: str) -> dict[str, dict[str, Any]]:
            body = {"query": question, "mode": "keyword", "explain": True, "top_k": 10}
            found = client.post("/v1/collections/c/search", json=body).json()
            kept = {k["id"]: k for k in found["explain"]["sub_queries"][0]["kept"]}
            return {r["document_id"]: kept[r["id"]] for r in found["results"]}

        common = weighed("how do I back up the database?")
        rare = weighed("dump")
    assert len(common) == 10  # top_k of the 25, each holding both words
    for found in common.values():
        assert found["coverage"] == 1.0  # every chunk holds both words ...
        assert found["specificity"] < 0  # ... as more than one would by chance
        assert found["relevance"] == found["lexical"] < 0.3
        assert found["band"] == "weak"
    (held,) = rare.values()
    assert held["coverage"] == 1.0 and held["specificity"] > 0
    assert held["relevance"] > 0.5 and held["band"] == "strong"
