"""Highlights over HTTP on real PostgreSQL: each chunk result carries the passage around the
query's words as escaped HTML with the matches in <mark>, found in the chunk's own language."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from typing import Any

import pytest
from litestar.testing import TestClient

from cari.answer.citations import citation
from cari.search.highlights import MAX_WORDS, MIN_WORDS, plain
from tests.conftest import app_client
from tests.test_search import add, search

FILLER = " ".join(f"kata{n}" for n in range(120))
GUIDE = [
    {
        "id": "long",
        "title": "Manual",
        "text": f"Pendahuluan buku panduan. {FILLER} Garansi mesin berlaku lima tahun "
        f"sejak tanggal pembelian. {FILLER}",
    },
    {"id": "markup", "title": "Harga", "text": "Harga <b>khusus</b> & diskon: R&D <script>x"},
    {
        "id": "english",
        "title": "Warranty",
        "text": "The engine warranties last five years from purchase.",
        "language": "english",
    },
    {"id": "cicilan", "title": "Kredit", "text": "Cicilan ringan mulai dua juta per bulan."},
    {
        "id": "dump",
        "title": "Backups",
        "text": "Run cari db dump FILE to back up the database, and cari db restore FILE to "
        "load it again.",
        "language": "english",
    },
]
MARKS = re.compile(r"<mark>(.*?)</mark>")


@pytest.fixture(scope="module")
def guide(module_dsn: str) -> Iterator[TestClient[Any]]:
    with app_client(module_dsn) as client:
        client.post("/v1/collections", json={"name": "guide", "language": "indonesian"})
        add(client, "guide", GUIDE)
        yield client


def results(client: TestClient[Any], text: str, **body: Any) -> dict[str, dict[str, Any]]:
    found = search(client, "guide", query=text, **body)
    return {r["document_id"]: r for r in found["results"]}


def test_the_passage_is_around_the_match_not_the_start(guide: TestClient[Any]) -> None:
    long = results(guide, "garansi mesin", mode="keyword")["long"]
    highlight = long["highlight"]
    assert MARKS.findall(highlight) == ["Garansi", "mesin"]
    assert "Pendahuluan" not in highlight  # the start of the chunk is 120 words away
    words = plain(highlight).split()
    assert MIN_WORDS <= len(words) <= MAX_WORDS
    assert " ".join(words) in " ".join(long["content"].split())


def test_a_short_chunk_is_its_own_passage(guide: TestClient[Any]) -> None:
    """Its first words too: they may be what answers the question."""
    dump = results(guide, "how do I back up the database?", mode="keyword")["dump"]
    assert MARKS.findall(dump["highlight"]) == ["back", "database"]
    assert " ".join(plain(dump["highlight"]).split()) == " ".join(dump["content"].split())


def test_text_is_escaped_and_tags_in_it_are_not_passed_through(guide: TestClient[Any]) -> None:
    highlight = results(guide, "harga diskon", mode="keyword")["markup"]["highlight"]
    assert MARKS.findall(highlight) == ["Harga", "diskon"]
    assert "&amp;" in highlight
    # Only <mark> tags are left: the content's own markup is gone or escaped.
    assert re.sub(r"</?mark>", "", highlight).count("<") == 0


def test_each_chunk_is_matched_in_its_own_language(guide: TestClient[Any]) -> None:
    # "warranty" stems as English in the English chunk: "warranties" matches.
    found = results(guide, "engine warranty", mode="keyword")
    assert MARKS.findall(found["english"]["highlight"]) == ["engine", "warranties"]


def test_no_word_in_common_gives_the_start_of_the_chunk(guide: TestClient[Any]) -> None:
    found = results(guide, "biaya perawatan kendaraan", mode="vector")
    for result in found.values():
        highlight = result["highlight"]
        assert "<mark>" not in highlight
        start = " ".join(html.unescape(highlight).split()[:3])
        # A passage of a long chunk drops tags (ts_headline's parser); a short chunk is whole.
        text = result["content"]
        if len(text.split()) > MAX_WORDS:
            text = re.sub(r"<[^>]*>", " ", text)
        assert " ".join(text.split()).startswith(start), highlight


def test_synonyms_are_marked(guide: TestClient[Any]) -> None:
    put = guide.put("/v1/collections/guide/synonyms", json={"rules": ["angsuran => cicilan"]})
    assert put.status_code == 200
    try:
        found = results(guide, "angsuran", mode="keyword")
        assert MARKS.findall(found["cicilan"]["highlight"]) == ["Cicilan"]
    finally:
        guide.put("/v1/collections/guide/synonyms", json={"rules": []})


def test_a_question_of_stop_words_only_still_gets_a_passage(guide: TestClient[Any]) -> None:
    found = results(guide, "yang di dari", mode="vector")
    assert found and all(r["highlight"] and "<mark>" not in r["highlight"] for r in found.values())


def test_citations_carry_the_highlight(guide: TestClient[Any]) -> None:
    answer = guide.post(
        "/v1/collections/guide/answer",
        json={"query": "berapa lama garansi mesin", "threshold": 0},
    )
    assert answer.status_code == 200, answer.text
    snippets = [c["snippet"] for c in answer.json()["citations"].values()]
    assert any("<mark>Garansi</mark>" in s for s in snippets), snippets


def test_citation_snippet_of_a_structured_source_is_escaped() -> None:
    from tests.test_citations import result

    found = citation(1, result("catalog:A&B", "catalog", "A&B", "Price <b>Rp 1</b> & more"))
    assert found.snippet == "Price &lt;b&gt;Rp 1&lt;/b&gt; &amp; more"
