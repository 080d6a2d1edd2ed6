"""The relevance scale and the threshold rule, and the evidence as PostgreSQL computes it."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest
from litestar.testing import TestClient

from cari.search.relevance import Evidence, Scale, band, keep
from tests.conftest import app_client
from tests.fake_openai import FakeOpenAI

SCALE = Scale(cosine_floor=0.8, cosine_ceiling=0.98)


@pytest.mark.parametrize(
    ("cosine", "coverage", "expected"),
    [
        (0.80, 0.0, 0.1),  # the floor
        (0.845, 0.0, 0.25),  # a quarter of the way: the default answer threshold
        (0.89, 0.0, 0.5),  # halfway
        (0.935, 0.0, 0.75),
        (0.98, 0.0, 0.9),  # the ceiling
        (None, 0.7, 0.25),  # keyword mode: coverage alone
        (None, 0.8, 0.5),
        (None, 1.0, 0.9),  # every query word, e.g. a SKU the embedder does not know
        (0.89, 0.7, 0.5),  # the larger of the two
        (0.70, 1.0, 0.9),
    ],
)
def test_scale(cosine: float | None, coverage: float, expected: float) -> None:
    assert SCALE.relevance(Evidence(cosine, coverage)) == pytest.approx(expected, abs=1e-9)


def test_no_evidence_is_a_gate_every_piece_counts_smoothly() -> None:
    """Coverage 0.59 was under the 0.6 floor, so relevance 0, however many of the question's
    words the chunk held; a cosine under the floor was 0 too. Now both only lower it, and more
    evidence never lowers it."""
    assert SCALE.relevance(Evidence(None, 0.59)) == pytest.approx(0.0905, abs=1e-4)
    assert 0 < SCALE.relevance(Evidence(0.5, 0.0)) < SCALE.relevance(Evidence(0.79, 0.0)) < 0.1
    coverages = [i / 100 for i in range(101)]
    lexical = [SCALE.relevance(Evidence(None, c)) for c in coverages]
    assert all(0 < a < b < 1 for a, b in pairwise(lexical))
    cosines = [0.6 + i / 250 for i in range(101)]
    dense = [SCALE.relevance(Evidence(c, 0.0)) for c in cosines]
    assert all(a < b for a, b in pairwise(dense))
    # Neighbouring evidence gives neighbouring relevance: no step anywhere.
    assert max(b - a for a, b in pairwise(lexical)) < 0.03
    # Either piece of evidence alone may make a chunk relevant; both never make it less so.
    assert SCALE.relevance(Evidence(0.845, 0.7)) >= 0.25
    assert SCALE.relevance(Evidence(0.845, 0.7), "either") == pytest.approx(1 - 0.75 * 0.75)


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
