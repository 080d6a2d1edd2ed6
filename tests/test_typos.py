"""Typo tolerance over HTTP on real PostgreSQL: a query word the collection does not know
matches its closest known word, below an exact match, found through the word as typed and the
common words of English and Indonesian (migration 0019) or the collection's own lexemes; known
words, common words, mistyped stop words, exact tokens and numbers are never corrected;
`explain` lists each correction; new collections correct at 0.7, and `typo_weight` 0 leaves
keyword search as it was."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from bench.typos import misspell_word
from litestar.testing import TestClient

from cari import typos
from cari.db import statements
from cari.db.migrations import earlier_revision
from cari.runtime import open_runtime
from cari.schema.search import SearchRequest
from tests.conftest import app_client, settings_for
from tests.test_search import add, search

DEALER = [
    {"id": "garansi", "title": "Layanan", "text": "Garansi mesin tiga tahun untuk semua mobil."},
    {"id": "cicilan", "title": "Pembayaran", "text": "Cicilan ringan mulai dua juta per bulan."},
    {"id": "sku", "title": "Suku cadang", "text": "Filter oli XJ9000 tersedia sejak 2024."},
    {"id": "servis", "title": "Bengkel", "text": "Servis berkala setiap sepuluh ribu kilometer."},
]


LIBRARY = [
    {"id": "compilers", "title": "Compilers", "text": "The efficiency of compilers for complex "
     "programs."},
    {"id": "house", "title": "Homes", "text": "A house with a garden in the city."},
    {"id": "market", "title": "Market", "text": "Used cars are sold here."},
]  # fmt: skip


@pytest.fixture(scope="module")
def dealer(module_dsn: str) -> Iterator[TestClient[Any]]:
    """The same documents in a collection with typo tolerance and one without; and English
    documents in a collection with it."""
    with app_client(module_dsn) as client:
        for name, weight in (("dealer", 0.7), ("strict", 0)):
            body = {"name": name, "language": "indonesian", "typo_weight": weight}
            response = client.post("/v1/collections", json=body)
            assert response.status_code == 201, response.text
            add(client, name, DEALER)
        body = {"name": "library", "language": "english", "typo_weight": 0.7}
        assert client.post("/v1/collections", json=body).status_code == 201
        add(client, "library", LIBRARY)
        yield client


def keyword(client: TestClient[Any], collection: str, text: str) -> dict[str, float]:
    found = search(client, collection, query=text, mode="keyword")
    return {r["document_id"]: r["retrievers"]["keyword"]["score"] for r in found["results"]}


def corrections(client: TestClient[Any], collection: str, text: str) -> list[dict[str, Any]]:
    found = search(client, collection, query=text, mode="keyword", explain=True)
    result: list[dict[str, Any]] = found["explain"]["corrections"]
    return result


def test_a_misspelled_word_finds_the_chunk_below_the_word_itself(
    dealer: TestClient[Any],
) -> None:
    exact = keyword(dealer, "dealer", "garansi")
    fuzzy = keyword(dealer, "dealer", "garnsi")
    assert set(fuzzy) == set(exact) == {"garansi"}
    assert 0 < fuzzy["garansi"] < exact["garansi"]


def test_the_highlight_marks_the_corrected_word(dealer: TestClient[Any]) -> None:
    found = search(dealer, "dealer", query="garnsi", mode="keyword")
    assert "<mark>Garansi</mark>" in found["results"][0]["highlight"]


def test_explain_lists_each_correction(dealer: TestClient[Any]) -> None:
    listed = corrections(dealer, "dealer", "garnsi cicilan")
    assert [(c["word"], c["lexeme"], c["language"]) for c in listed] == [
        ("garnsi", "garansi", "indonesian")
    ]
    assert listed[0]["weight"] == 0.7


@pytest.mark.parametrize(
    ("typed", "edit"),
    [("garnasi", "swap"), ("gaaransi", "insertion"), ("garamsi", "substitution")],
)
def test_one_edit_of_any_kind_is_corrected(dealer: TestClient[Any], typed: str, edit: str) -> None:
    listed = corrections(dealer, "dealer", typed)
    assert [(c["word"], c["lexeme"]) for c in listed] == [(typed, "garansi")], edit
    assert set(keyword(dealer, "dealer", typed)) == {"garansi"}


def test_corrections_come_from_the_collection_alone(dealer: TestClient[Any]) -> None:
    """A word only another collection knows is no correction (the neighbours' keys are the
    collection's own)."""
    response = dealer.post("/v1/collections", json={"name": "insurer", "typo_weight": 0.7,
                                                    "language": "indonesian"})  # fmt: skip
    assert response.status_code == 201, response.text
    add(dealer, "insurer", [{"id": "a", "title": "Polis", "text": "Asuransi jiwa keluarga."}])
    assert [c["lexeme"] for c in corrections(dealer, "insurer", "asurnsi")] == ["asuransi"]
    assert corrections(dealer, "dealer", "asurnsi") == []
    assert dealer.delete("/v1/collections/insurer").status_code in (200, 204)


def pairs(client: TestClient[Any], collection: str, text: str) -> set[tuple[str, str]]:
    return {(c["word"], c["lexeme"]) for c in corrections(client, collection, text)}


def test_a_word_the_stemmer_cannot_reduce_is_corrected_through_the_word_typed(
    dealer: TestClient[Any],
) -> None:
    """The stemmer leaves "efficiencuy" whole, far from the lexeme "effici", but it is one
    letter from the common word "efficiency"; "complers" ("compler") is one letter from the
    lexeme "complex" but was typed one letter from "compilers"."""
    assert pairs(dealer, "library", "efficiencuy complers") == {
        ("efficiencuy", "effici"),
        ("compler", "compil"),
    }
    assert set(keyword(dealer, "library", "complers")) == {"compilers"}


def test_two_letters_swapped_are_one_edit(dealer: TestClient[Any]) -> None:
    assert pairs(dealer, "library", "uesd") == {("uesd", "use")}
    assert set(keyword(dealer, "library", "uesd")) == {"market"}


def test_a_common_word_the_collection_lacks_is_no_typo(dealer: TestClient[Any]) -> None:
    """The word "mouse" is one letter from "house" but a word of its own: an off-topic
    question is not bent into the collection's words; "huose" is a typo."""
    assert pairs(dealer, "library", "mouse") == set()
    assert keyword(dealer, "library", "mouse") == {}
    assert pairs(dealer, "library", "huose") == {("huos", "hous")}


def test_a_mistyped_stop_word_is_not_made_a_word(dealer: TestClient[Any]) -> None:
    """The typed "witi" is one letter from the collection's "citi" (city) and from the stop
    word "with", which it is taken for: nothing to search."""
    assert pairs(dealer, "library", "witi") == set()
    assert keyword(dealer, "library", "witi") == {}


@pytest.mark.parametrize(
    "text",
    ["straße ÄÖÜ", "東京 タワー", "don't e-mail co-op", "?!", "a" * 300, "x1y2 ___ ..."],
)
def test_any_text_is_searched_with_corrections_on(dealer: TestClient[Any], text: str) -> None:
    """The word as typed is found in any script and shape: no error, at most a correction per
    unknown word."""
    listed = corrections(dealer, "library", text)
    assert len(listed) <= len(text.split())
    assert isinstance(keyword(dealer, "library", text), dict)


def test_a_known_word_is_never_corrected(dealer: TestClient[Any]) -> None:
    assert corrections(dealer, "dealer", "cicilan servis mesin") == []
    assert keyword(dealer, "dealer", "servis") == keyword(dealer, "strict", "servis")


@pytest.mark.parametrize("text", ["XJ9001", "2025", "XJ-9000"])
def test_exact_tokens_and_numbers_are_never_corrected(dealer: TestClient[Any], text: str) -> None:
    assert corrections(dealer, "dealer", text) == []
    assert keyword(dealer, "dealer", text) == keyword(dealer, "strict", text)


def test_a_collection_without_tolerance_is_unchanged(dealer: TestClient[Any]) -> None:
    assert dealer.get("/v1/collections/strict").json()["typo_weight"] == 0
    assert keyword(dealer, "strict", "garnsi") == {}
    assert corrections(dealer, "strict", "garnsi") == []
    assert keyword(dealer, "strict", "garnsi cicilan") == keyword(dealer, "strict", "cicilan")


def test_a_new_collection_corrects_typos(dealer: TestClient[Any]) -> None:
    assert dealer.post("/v1/collections", json={"name": "plain"}).status_code == 201
    assert dealer.get("/v1/collections/plain").json()["typo_weight"] == 0.7
    add(dealer, "plain", DEALER[:1])
    assert set(keyword(dealer, "plain", "garnsi")) == {"garansi"}
    assert dealer.delete("/v1/collections/plain").status_code in (200, 204)


def test_the_setting_is_changed_and_bounded(dealer: TestClient[Any]) -> None:
    assert dealer.get("/v1/collections/dealer").json()["typo_weight"] == 0.7
    response = dealer.patch("/v1/collections/strict", json={"typo_weight": 1})
    assert response.status_code == 422, response.text
    response = dealer.patch("/v1/collections/strict", json={"typo_weight": 0.5})
    assert response.status_code == 200, response.text
    assert set(keyword(dealer, "strict", "garnsi")) == {"garansi"}
    assert dealer.patch("/v1/collections/strict", json={"typo_weight": 0}).status_code == 200


def vector(client: TestClient[Any], collection: str, text: str) -> tuple[list[Any], str]:
    """Vector search's ranking with its scores, and the text it embedded."""
    found = search(client, collection, query=text, mode="vector", explain=True)
    ranked = [(r["document_id"], r["retrievers"]["vector"]["score"]) for r in found["results"]]
    return ranked, found["explain"]["sub_queries"][0]["embedded_query"]


def test_the_vector_side_embeds_the_question_respelled(dealer: TestClient[Any]) -> None:
    """Each misspelled word keyword search reads as a common word is that word in the text the
    vector side embeds, so vector search ranks as for the question spelled right; a word typed
    with a capital keeps it."""
    respelled, embedded = vector(dealer, "library", "Efficiencuy of complers, witi garden")
    assert embedded == "Efficiency of compilers, with garden"
    assert respelled == vector(dealer, "library", "Efficiency of compilers, with garden")[0]
    assert vector(dealer, "library", "efficiency of compilers")[1] == "efficiency of compilers"


def test_a_question_of_common_words_is_not_sent_to_be_respelled(dealer: TestClient[Any]) -> None:
    """Only a word of 4 letters or more that is no common word can be respelled: without one,
    the embedding does not wait for the question's analysis (no `respell` stage)."""

    def stages(text: str) -> set[str]:
        found = search(dealer, "library", query=text, mode="vector", explain=True)
        return set(found["explain"]["sub_queries"][0]["timings_ms"])

    assert "respell" not in stages("Efficiency of the compilers, with a garden")
    assert "respell" not in stages("cmp of a hse")  # too short to be corrected
    assert "respell" in stages("efficiencuy of compilers")
    assert typos.SUSPECT_LETTERS == earlier_revision("0016").MIN_LENGTH


def test_one_analysis_gives_both_sides_their_words(
    dealer: TestClient[Any], module_dsn: str
) -> None:
    """The words the vector side respells come from the question's one analysis (migration
    0023): a misspelled hybrid search runs as many statements as the question spelled right (a
    statement more before, the respelling's)."""

    async def run() -> tuple[list[int], list[str]]:
        async with open_runtime(settings_for(module_dsn, reembed_interval_s=0)) as rt:
            counts, embedded = [], []
            for text in ("efficiency of compilers", "efficiencuy of complers"):
                request = SearchRequest(query=text, mode="hybrid", explain=True)
                await rt.searcher.search("library", request)  # the collection's row read once
                with statements.recording() as executed:
                    found = await rt.searcher.search("library", request)
                assert found.explain is not None
                counts.append(len(executed))
                embedded.append(found.explain.sub_queries[0].embedded_query or text)
            return counts, embedded

    counts, embedded = asyncio.run(run())
    assert embedded[1] == "efficiency of compilers"
    assert counts[0] == counts[1], counts


def test_an_analysis_that_fails_fails_the_search_it_was_waited_for(
    dealer: TestClient[Any], module_dsn: str
) -> None:
    """The vector side waits for the question's analysis to respell it: when the analysis
    fails (here its statement times out behind a lock on the common words), both sides end and
    the search answers its error, to be retried, rather than waiting for ever."""
    body = {"query": "efficiencuy of compilers", "mode": "hybrid"}
    with app_client(module_dsn, statement_timeout_ms=500) as client:
        # The service reads the common words once, here; the analysis reads them each time.
        assert client.post("/v1/collections/library/search", json=body).status_code == 200
        with psycopg.connect(module_dsn, autocommit=True) as locker, locker.transaction():
            locker.execute("LOCK TABLE typo_words IN ACCESS EXCLUSIVE MODE")
            failed = client.post("/v1/collections/library/search", json=body)
        assert failed.status_code == 503, failed.text
        assert failed.json()["code"] == "statement_timeout"
        assert client.post("/v1/collections/library/search", json=body).status_code == 200


def _mistyped(word: str, rng: random.Random) -> str:
    """`word` as `bench.typos` misspells a word, or as it is, one time in two."""
    if len(word) < 3 or rng.random() < 0.5:
        return word
    return misspell_word(word, rng)


def test_the_corrections_are_those_of_the_function_before(
    dealer: TestClient[Any], module_dsn: str
) -> None:
    """Migration 0024's `query_corrected` (each lookup once per candidate) gives 0023's rows, row
    for row: on questions of the collections' words, common words and stop words of both
    languages and a few of other scripts and shapes, mistyped at random, in each collection and
    text search configuration."""
    rng = random.Random(24)
    vocabulary = " ".join(d["text"] for d in DEALER + LIBRARY).lower().replace(".", "").split()
    vocabulary += ["yang", "dengan", "adalah", "berapa", "with", "about", "which", "garden"]
    vocabulary += ["naïve", "größe", "добрый", "日本語", "XJ9000", "e-mail", "l'eau"]
    texts = [
        " ".join(_mistyped(rng.choice(vocabulary), rng) for _ in range(rng.randint(1, 8)))
        for _ in range(150)
    ]
    before = earlier_revision("0023").QUERY_CORRECTED.replace(
        "FUNCTION query_corrected(", "FUNCTION pg_temp.corrected_0023("
    )
    corrected = respelled = 0
    with psycopg.connect(module_dsn, autocommit=True) as conn:
        conn.execute(before)
        ids = [row[0] for row in conn.execute("SELECT id FROM collections ORDER BY id")]
        for collection in ids:
            for config in ("indonesian", "english", "simple"):
                for text in texts:
                    rows = {}
                    for function in ("query_corrected", "pg_temp.corrected_0023"):
                        cur = conn.execute(
                            f"SELECT * FROM {function}(%s, %s::regconfig, %s)",  # noqa: S608
                            (collection, config, text),
                        )
                        rows[function] = sorted(cur.fetchall(), key=repr)
                    assert rows["query_corrected"] == rows["pg_temp.corrected_0023"], text
                    corrected += sum(1 for r in rows["query_corrected"] if r[5] is not None)
                    respelled += sum(1 for r in rows["query_corrected"] if r[6] is not None)
    assert corrected > 100 and respelled > 100, (corrected, respelled)  # not empty against empty


def test_without_tolerance_the_question_is_embedded_as_typed(dealer: TestClient[Any]) -> None:
    ranked, embedded = vector(dealer, "strict", "garnsi mesin")
    assert embedded == "garnsi mesin"
    assert ranked != vector(dealer, "strict", "garansi mesin")[0]
    assert vector(dealer, "dealer", "garnsi mesin")[1] == "garansi mesin"


def test_the_neighbours_keys_are_those_the_indexes_were_built_with(module_dsn: str) -> None:
    """`lexeme_neighbours` (PL/pgSQL since migration 0020) gives 0016's SQL function's keys,
    bit for bit, on the common words and on random text of several scripts and shapes: the GIN
    indexes built with 0016's keys stay valid."""
    rng = random.Random(20)
    letters = "abcdefghijklmnopqrstuvwxyzäößéñ東京дшжы_-'1 "
    words = ["", "ab", "abc", "a1c", "naïve", "ÄÖÜß", "добрый", "日本語です", "🙂🙂🙂🙂", "x y"]
    words += ["".join(rng.choices(letters, k=rng.randint(1, 14))) for _ in range(3000)]
    before = earlier_revision("0016").LEXEME_NEIGHBOURS.replace(
        "FUNCTION lexeme_neighbours(", "FUNCTION pg_temp.neighbours_0016("
    )
    with psycopg.connect(module_dsn, autocommit=True) as conn:
        conn.execute(before)
        common = conn.execute("SELECT count(*) FROM typo_words").fetchone()
        assert common is not None and common[0] > 60_000
        for seed in (0, -7):  # the common words', and a collection's
            differ = conn.execute(
                """SELECT count(*) FILTER (WHERE lexeme_neighbours(%(seed)s, w)
                                           IS DISTINCT FROM pg_temp.neighbours_0016(%(seed)s, w)),
                          count(*) FILTER (WHERE lexeme_neighbours(%(seed)s, w) IS NOT NULL)
                   FROM (SELECT unnest(%(words)s::text[]) UNION ALL SELECT word FROM typo_words)
                        AS t (w)""",
                {"seed": seed, "words": words},
            ).fetchone()
            assert differ is not None and differ[0] == 0
            assert differ[1] > 60_000  # keys compared, not NULL against NULL
