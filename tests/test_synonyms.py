"""Synonym rules per collection over HTTP and the CLI, on real PostgreSQL: applied at query
time to keyword search (and its relevance evidence and highlights), shown in `explain`, and
leaving vector search and collections without rules unchanged."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from litestar.testing import TestClient

from tests.conftest import app_client, cli_env
from tests.fake_openai import FakeOpenAI
from tests.test_ingest_cli import cari
from tests.test_search import add, search

DEALER = [
    {"id": "cicilan", "title": "Pembayaran", "text": "Cicilan ringan mulai dua juta per bulan."},
    {"id": "angsuran", "title": "Kredit", "text": "Angsuran tetap selama lima tahun."},
    {"id": "crv", "title": "SUV", "text": "Honda CRV hadir dengan mesin turbo."},
    {"id": "cr-v", "title": "SUV", "text": "Honda CR-V punya tujuh kursi."},
    {"id": "servis", "title": "Bengkel", "text": "Servis berkala setiap sepuluh ribu kilometer."},
]
RULES = ["CRV, CR-V", "angsuran => cicilan"]


@pytest.fixture(scope="module")
def dealer(module_dsn: str) -> Iterator[TestClient[Any]]:
    """An Indonesian collection embedded by the real local model, and one with no rules."""
    with app_client(module_dsn) as client:
        for name in ("dealer", "plain"):
            client.post("/v1/collections", json={"name": name, "language": "indonesian"})
            add(client, name, DEALER)
        response = client.put("/v1/collections/dealer/synonyms", json={"rules": RULES})
        assert response.status_code == 200, response.text
        yield client


def keyword(client: TestClient[Any], collection: str, text: str) -> dict[str, float]:
    found = search(client, collection, query=text, mode="keyword")
    return {r["document_id"]: r["retrievers"]["keyword"]["score"] for r in found["results"]}


def test_rules_are_saved_normalised_and_read_back(dealer: TestClient[Any]) -> None:
    assert dealer.get("/v1/collections/dealer/synonyms").json() == {"rules": RULES}
    assert dealer.get("/v1/collections/plain/synonyms").json() == {"rules": []}
    response = dealer.put(
        "/v1/collections/plain/synonyms", json={"rules": ["  a ,   b  ", "x=>y,  z"]}
    )
    assert response.json() == {"rules": ["a , b", "x=>y, z"]}
    assert dealer.put("/v1/collections/plain/synonyms", json={"rules": []}).status_code == 200


def test_one_way_rule_finds_the_right_side_only_from_the_left(dealer: TestClient[Any]) -> None:
    assert set(keyword(dealer, "plain", "angsuran")) == {"angsuran"}
    assert set(keyword(dealer, "dealer", "angsuran")) == {"angsuran", "cicilan"}
    assert set(keyword(dealer, "dealer", "cicilan")) == {"cicilan"}  # one way


def test_equivalence_works_both_ways(dealer: TestClient[Any]) -> None:
    assert set(keyword(dealer, "plain", "CRV")) == {"crv"}
    assert set(keyword(dealer, "dealer", "CRV")) == {"crv", "cr-v"}
    assert set(keyword(dealer, "dealer", "CR-V")) == {"crv", "cr-v"}


def test_an_added_term_scores_like_the_word_it_stands_for(dealer: TestClient[Any]) -> None:
    # "CRV" finds the chunk saying "CR-V" with the score "CR-V" itself gets there: the added
    # lexemes weigh as the query's own, on their own statistics.
    assert keyword(dealer, "dealer", "CRV")["cr-v"] == pytest.approx(
        keyword(dealer, "plain", "CR-V")["cr-v"], rel=1e-12
    )
    assert keyword(dealer, "dealer", "angsuran")["cicilan"] == pytest.approx(
        keyword(dealer, "plain", "cicilan")["cicilan"], rel=1e-12
    )
    # A chunk saying both forms counts the better one, not both.
    both = [{"id": "both", "title": "SUV", "text": "CRV atau CR-V: nama yang sama."}]
    add(dealer, "dealer", both)
    add(dealer, "plain", both)
    try:
        plain = keyword(dealer, "plain", "CR-V")["both"]
        assert keyword(dealer, "dealer", "CRV")["both"] == pytest.approx(
            max(plain, keyword(dealer, "plain", "CRV")["both"]), rel=1e-12
        )
    finally:
        for name in ("dealer", "plain"):
            dealer.delete(f"/v1/collections/{name}/documents/both")


def test_a_rule_applies_in_each_chunk_s_own_language(dealer: TestClient[Any]) -> None:
    # Rules are analysed by every configuration: in the English chunk "installments" is
    # stemmed as English, and "angsuran" reaches it through a rule naming "installment".
    english = [
        {"id": "en", "title": "Plans", "text": "Installments start low.", "language": "english"}
    ]
    add(dealer, "plain", english)
    try:
        assert "en" not in keyword(dealer, "plain", "angsuran")
        put = dealer.put(
            "/v1/collections/plain/synonyms", json={"rules": ["angsuran => installment"]}
        )
        assert put.status_code == 200, put.text
        assert "en" in keyword(dealer, "plain", "angsuran")
    finally:
        dealer.put("/v1/collections/plain/synonyms", json={"rules": []})
        dealer.delete("/v1/collections/plain/documents/en")


def test_no_rule_leaves_keyword_search_unchanged(dealer: TestClient[Any]) -> None:
    for text in ("servis berkala", "honda mesin turbo", "cicilan"):
        assert keyword(dealer, "dealer", text) == keyword(dealer, "plain", text)


def test_vector_search_is_unaffected(dealer: TestClient[Any]) -> None:
    def vector(collection: str) -> list[tuple[str, float]]:
        found = search(dealer, collection, query="angsuran CRV", mode="vector")
        return [(r["document_id"], r["retrievers"]["vector"]["score"]) for r in found["results"]]

    assert vector("dealer") == vector("plain")


def test_hybrid_search_keeps_the_synonym_match_above_the_threshold(
    dealer: TestClient[Any],
) -> None:
    # The relevance evidence counts "cicilan" as covering "angsuran" too.
    found = search(dealer, "dealer", query="angsuran", threshold=0.25, explain=True)
    assert "cicilan" in [r["document_id"] for r in found["results"]]
    coverage = {w["id"]: w["coverage"] for w in found["explain"]["sub_queries"][0]["kept"]}
    ids = {r["document_id"]: r["id"] for r in found["results"]}
    assert coverage[ids["cicilan"]] == 1.0


def test_explain_lists_the_rules_fired_and_the_lexemes_added(dealer: TestClient[Any]) -> None:
    found = search(dealer, "dealer", query="angsuran CRV", mode="keyword", explain=True)
    fired = [
        (f["rule"], f["language"], f["matched"], f["added"]) for f in found["explain"]["synonyms"]
    ]
    assert fired == [
        ("CRV, CR-V", "indonesian", ["crv"], ["cr", "cr-v", "v"]),
        ("angsuran => cicilan", "indonesian", ["angsur"], ["cicil"]),
    ]
    assert search(dealer, "plain", query="angsuran", explain=True)["explain"]["synonyms"] == []


@pytest.mark.parametrize(
    ("rule", "reason"),
    [
        ("solo", "an equivalence needs at least two terms"),
        ("a => b => c", "more than one '=>'"),
        ("=> cicilan", "needs terms on both sides"),
        ("a, , b", "has an empty term"),
        ("kredit, kredit", "names a term twice"),
        ("yang, kredit", "'yang' has no searchable word in indonesian"),
        ("a\x00b, c", "must not hold a NUL character (U+0000)"),
    ],
)
def test_a_bad_rule_is_named_in_a_422_and_nothing_changes(
    dealer: TestClient[Any], rule: str, reason: str
) -> None:
    response = dealer.put(
        "/v1/collections/dealer/synonyms", json={"rules": ["kredit, pinjaman", rule]}
    )
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["code"] == "invalid_input"
    named = rule.replace("\x00", "\\x00")
    assert f"rule '{named}'" in problem["detail"] and reason in problem["detail"]
    assert dealer.get("/v1/collections/dealer/synonyms").json() == {"rules": RULES}


def test_bad_bodies_and_unknown_collections(dealer: TestClient[Any]) -> None:
    put = dealer.put
    assert put("/v1/collections/dealer/synonyms", json={"rules": [""]}).status_code == 422
    assert put("/v1/collections/dealer/synonyms", json={"rules": "a, b"}).status_code == 422
    assert put("/v1/collections/dealer/synonyms", json={"rule": ["a, b"]}).status_code == 422
    assert put("/v1/collections/nope/synonyms", json={"rules": ["a, b"]}).status_code == 404
    assert dealer.get("/v1/collections/nope/synonyms").status_code == 404


def test_rules_go_with_their_collection(dsn: str) -> None:
    with app_client(dsn) as client:
        client.post("/v1/collections", json={"name": "gone", "language": "simple"})
        assert client.put("/v1/collections/gone/synonyms", json={"rules": RULES}).is_success
        assert client.delete("/v1/collections/gone").is_success
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM synonym_terms").fetchone() == (0,)


def test_cli_sets_shows_and_clears_rules(
    tmp_path: Path, dsn: str, clean_env: dict[str, str], fake: FakeOpenAI
) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO collections (name, language) VALUES ('shop', 'indonesian')")
    env = cli_env(clean_env, dsn, fake)
    rules = tmp_path / "rules.txt"
    rules.write_text("# cars\nCRV, CR-V\n\nangsuran => cicilan\n")
    assert cari(["synonyms", "set", str(rules), "-c", "shop"], env).stdout == "shop: 2 rules\n"
    assert cari(["synonyms", "show", "-c", "shop"], env).stdout == "\n".join(RULES) + "\n"
    rules.write_text("CRV\n")
    bad = cari(["synonyms", "set", str(rules), "-c", "shop"], env)
    assert bad.returncode == 1 and "rule 'CRV'" in bad.stderr
    assert cari(["synonyms", "show", "-c", "shop"], env).stdout == "\n".join(RULES) + "\n"
    assert cari(["synonyms", "clear", "-c", "shop"], env).stdout == "shop: 0 rules\n"
    assert cari(["synonyms", "show", "-c", "shop"], env).stdout == ""
