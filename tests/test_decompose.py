"""Query decomposition: the syntactic proposal as a pure function, and the collection's own
vocabulary deciding on real PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from litestar.testing import TestClient

from cari.search.decompose import (
    MAX_PARTS,
    CollectionVocabulary,
    Decomposition,
    decompose,
    propose,
)
from tests.conftest import app_client
from tests.fake_openai import FakeOpenAI


def parts(query: str) -> tuple[str, ...] | None:
    proposal = propose(query)
    return None if proposal is None else proposal.parts


@pytest.mark.parametrize(
    ("query", "expected", "pattern"),
    [
        ("civic vs jazz", ("civic", "jazz"), "vs"),
        ("civic vs. jazz", ("civic", "jazz"), "vs"),
        ("civic versus jazz", ("civic", "jazz"), "vs"),
        ("civic atau jazz", ("civic", "jazz"), "atau"),
        ("civic or jazz", ("civic", "jazz"), "or"),
        ("civic dan jazz", ("civic", "jazz"), "dan"),
        ("civic and jazz", ("civic", "jazz"), "and"),
        ("civic & jazz", ("civic", "jazz"), "&"),
        ("perbedaan civic dan jazz", ("civic", "jazz"), "perbedaan"),
        ("perbedaan antara civic dan jazz", ("civic", "jazz"), "perbedaan"),
        ("beda civic dan jazz", ("civic", "jazz"), "beda"),
        ("bedanya civic sama jazz", ("civic", "jazz"), "beda"),
        ("apa beda civic dengan jazz", ("civic", "jazz"), "beda"),
        ("difference between civic and jazz", ("civic", "jazz"), "difference between"),
        ("what is the difference between civic and jazz", ("civic", "jazz"), "difference between"),
        ("compare civic with jazz", ("civic", "jazz"), "compare"),
        ("compare civic and jazz", ("civic", "jazz"), "compare"),
        ("compare civic to jazz", ("civic", "jazz"), "compare"),
        ("bandingkan civic dengan jazz", ("civic", "jazz"), "bandingkan"),
        ("perbandingan civic dan jazz", ("civic", "jazz"), "perbandingan"),
        ("civic, jazz dan brio", ("civic", "jazz", "brio"), "list"),
        ("civic, jazz, and brio", ("civic", "jazz", "brio"), "list"),
        ("civic, jazz or brio", ("civic", "jazz", "brio"), "list"),
        ("civic vs jazz vs brio", ("civic", "jazz", "brio"), "vs"),
    ],
)
def test_every_pattern_is_proposed(query: str, expected: tuple[str, ...], pattern: str) -> None:
    proposal = propose(query)
    assert proposal is not None
    assert proposal.parts == expected
    assert proposal.pattern == pattern


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("harga honda veloz vs toyota avanza", ("harga honda veloz", "harga toyota avanza")),
        ("features of Civic and Corolla", ("features of Civic", "features of Corolla")),
        ("Civic vs Corolla price", ("Civic price", "Corolla price")),
        ("harga civic, jazz dan brio", ("harga civic", "harga jazz", "harga brio")),
        ("harga civic atau jazz", ("harga civic", "harga jazz")),  # a disjunction of items
        ("perbedaan Civic dan Corolla", ("Civic", "Corolla")),
        (
            "difference between civic and corolla fuel economy",
            ("civic fuel economy", "corolla fuel economy"),
        ),
        # Words before the cue stay in the head; question filler there does not.
        (
            "fuel economy difference between civic and corolla",
            ("fuel economy civic", "fuel economy corolla"),
        ),
        ("bandingkan harga civic dengan jazz", ("harga civic", "harga jazz")),
        # A middle segment is an item whole: it gives no words to the head or tail.
        ("harga jazz, honda brio dan yaris", ("harga jazz", "harga honda brio", "harga yaris")),
    ],
)
def test_a_shared_head_or_tail_is_distributed(query: str, expected: tuple[str, ...]) -> None:
    assert parts(query) == expected


def test_case_punctuation_and_duplicates() -> None:
    assert parts("Harga Honda Veloz VS. Toyota Avanza?!") == (
        "Harga Honda Veloz",
        "Harga Toyota Avanza",
    )
    assert parts("PERBEDAAN Civic DAN Corolla.") == ("Civic", "Corolla")
    assert parts("civic, Jazz dan jazz") == ("civic", "Jazz")
    assert parts("civic vs Civic") is None


def test_at_most_five_parts() -> None:
    five = "honda, toyota, suzuki, daihatsu dan mazda"
    assert parts(five) is not None and len(parts(five) or ()) == MAX_PARTS
    assert parts("honda, toyota, suzuki, daihatsu, mazda dan nissan") is None


@pytest.mark.parametrize(
    "query",
    [
        "harga honda veloz",
        "perbedaan harga",
        "civic vs",
        "and jazz",
        "civic, jazz",
        # Bare conjunctions in long questions join clauses or concepts, not items.
        "what are the effects of heat and mass transfer on the boundary layer",
        "how does X grow and what affects it",
        "kapan Sense and Sensibility dirilis",
        # A disjunction after a preposition: one topic, in either of two places.
        "electron microscopy of lung or bronchi",
        "mikroskop elektron pada paru atau bronkus",
        # One kind of separator, one sentence.
        "civic dan jazz atau brio",
        "civic and jazz. brio vs yaris",
        "civic, jazz dan brio, yaris",
    ],
)
def test_not_proposed(query: str) -> None:
    assert propose(query) is None


def test_a_bare_conjunction_names_its_junctions() -> None:
    proposal = propose("syarat dan ketentuan kredit")
    assert proposal is not None
    assert proposal.parts == ("syarat kredit", "ketentuan kredit")
    assert [j.phrase for j in proposal.junctions] == ["syarat dan ketentuan"]
    # Comparison markers split whatever the collection says about phrases.
    marked = propose("perbedaan syarat dan ketentuan")
    assert marked is not None and marked.junctions == ()


CARS = [
    {"id": "veloz", "title": "Honda Veloz", "text": "Harga Honda Veloz mulai 300 juta."},
    {"id": "avanza", "title": "Toyota Avanza", "text": "Harga Toyota Avanza mulai 250 juta."},
    *(
        {
            "id": f"kredit-{n}",
            "title": f"Kredit {n}",
            "text": f"Paket kredit {n} dengan tenor {12 * n} bulan. Syarat dan ketentuan berlaku.",
        }
        for n in (1, 2, 3)
    ),
]
COLOURS = [
    {"id": "black", "text": "Black paint and white seats on the sedan."},
    {"id": "white", "text": "White paint with black seats on the hatchback."},
]


@pytest.fixture
def client(dsn: str, fake: FakeOpenAI) -> Iterator[TestClient[Any]]:
    with app_client(dsn, fake) as test_client:
        for name, language, documents in (
            ("mobil", "indonesian", CARS),
            ("colours", "english", COLOURS),
            ("empty", "english", []),
        ):
            created = test_client.post("/v1/collections", json={"name": name, "language": language})
            assert created.status_code == 201, created.text
            if documents:
                added = test_client.post(
                    f"/v1/collections/{name}/documents", json={"documents": documents}
                )
                assert added.status_code == 200, added.text
        yield test_client


def run(dsn: str, collection: str, query: str) -> Decomposition:
    async def work() -> Decomposition:
        async with await psycopg.AsyncConnection.connect(dsn) as conn:
            cur = await conn.execute("SELECT id FROM collections WHERE name = %s", (collection,))
            row = await cur.fetchone()
            assert row is not None
            return await decompose(query, CollectionVocabulary(conn, int(row[0])))

    return asyncio.run(work())


def test_items_the_collection_knows_are_split(client: TestClient[Any], dsn: str) -> None:
    result = run(dsn, "mobil", "harga honda veloz vs toyota avanza")
    assert result == Decomposition(("harga honda veloz", "harga toyota avanza"), "vs", None)
    assert run(dsn, "mobil", "harga mobil") == Decomposition(("harga mobil",), None, None)


def test_a_phrase_of_the_collection_is_not_split(client: TestClient[Any], dsn: str) -> None:
    query = "syarat dan ketentuan kredit"
    result = run(dsn, "mobil", query)
    assert result.parts == (query,) and result.pattern is None
    assert result.reason == (
        "'syarat dan ketentuan' is one phrase in this collection (3 of 3 chunks holding both words)"
    )


def test_words_that_only_meet_apart_are_split(client: TestClient[Any], dsn: str) -> None:
    # "black" and "white" share two chunks but never as "black and white": the collection's
    # evidence outweighs the built-in list.
    result = run(dsn, "colours", "black and white")
    assert result == Decomposition(("black", "white"), "and", None)


def test_an_item_the_collection_lacks_prevents_the_split(client: TestClient[Any], dsn: str) -> None:
    query = "harga honda veloz vs suzuki ertiga"
    result = run(dsn, "mobil", query)
    assert result == Decomposition(
        (query,), None, "'suzuki ertiga' matches nothing in this collection"
    )
    # A catalog item's name counts as the collection's vocabulary too.
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "INSERT INTO catalog_items (collection_id, sku, name, language) "
            "SELECT id, 'ERT-1', 'Suzuki Ertiga GX', language FROM collections "
            "WHERE name = 'mobil'"
        )
    assert run(dsn, "mobil", query).parts == ("harga honda veloz", "harga suzuki ertiga")


def test_known_words_count_compacted_and_pending_statistics(
    client: TestClient[Any], dsn: str
) -> None:
    with psycopg.connect(dsn) as conn:
        conn.execute("SELECT bm25_compact(id) FROM collections")
    assert run(dsn, "mobil", "honda vs toyota").parts == ("honda", "toyota")


def test_an_empty_collection_falls_back_to_the_built_in_list(
    client: TestClient[Any], dsn: str
) -> None:
    query = "terms and conditions"
    result = run(dsn, "empty", query)
    assert result == Decomposition(
        (query,),
        None,
        "'terms and conditions' is one phrase (built-in list; no evidence in this collection)",
    )
    # Other splits fail there for want of any known word.
    assert run(dsn, "empty", "civic vs jazz").reason == "'civic' matches nothing in this collection"
