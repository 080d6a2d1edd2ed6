"""The answer without an LLM: the right sentences chosen, cited with their source's number."""

from __future__ import annotations

import pytest

from cari.answer.citations import CitationFilter
from cari.answer.extractive import extractive_answer
from cari.schema.search import ResultKind, SearchResult


def result(
    number: int, content: str, kind: ResultKind = "chunk", title: str = "", relevance: float = 0.8
) -> SearchResult:
    return SearchResult(
        id=f"chunk:{number}" if kind == "chunk" else f"{kind}:SKU{number}",
        kind=kind,
        title=title,
        content=content,
        metadata={},
        score=0.5,
        relevance=relevance,
        band="strong",
        retrievers={},
        chunk_id=number if kind == "chunk" else None,
    )


INDONESIAN = [
    result(
        1,
        "Honda Civic RS memakai mesin 1.5 liter turbo. Konsumsi BBM mencapai 15 km per liter. "
        "Warna yang tersedia adalah merah, putih dan hitam.",
    ),
    result(
        2,
        "Garansi mesin berlaku 5 tahun atau 100.000 km, mana yang tercapai lebih dulu. "
        "Servis berkala dilakukan setiap 10.000 km di bengkel resmi.",
    ),
    result(
        3,
        "Pengembalian barang dapat diajukan dalam 7 hari. Biaya pengiriman Rp. 25.000 "
        "ditanggung pembeli. Dana dikembalikan dalam 3 hari kerja.",
    ),
]
ENGLISH = [
    result(
        1,
        "Our store opens at 9 a.m. on weekdays. On Sundays the store is closed.\n\n"
        "Parking is free for customers.",
    ),
    result(
        2,
        "Returns are accepted within 30 days of purchase. Refunds are paid to the original "
        "card within 5 business days. Sale items cannot be returned.",
    ),
]


@pytest.mark.parametrize(
    ("question", "sources", "expected"),
    [
        (
            "Berapa lama garansi mesinnya?",
            INDONESIAN,
            "Garansi mesin berlaku 5 tahun atau 100.000 km, mana yang tercapai lebih dulu. [2]",
        ),
        (
            "berapa biaya pengiriman untuk pengembalian?",
            INDONESIAN,
            "Pengembalian barang dapat diajukan dalam 7 hari. [3] "
            "Biaya pengiriman Rp. 25.000 ditanggung pembeli. [3]",
        ),
        (
            "kapasitas mesin Civic RS berapa liter?",
            INDONESIAN,
            "Honda Civic RS memakai mesin 1.5 liter turbo. [1]",
        ),
        (
            "When are refunds paid?",
            ENGLISH,
            "Refunds are paid to the original card within 5 business days. [2]",
        ),
        (
            "Is the store open on Sunday?",
            ENGLISH,
            "Our store opens at 9 a.m. on weekdays. [1] On Sundays the store is closed. [1]",
        ),
        ("Do you have free parking?", ENGLISH, "Parking is free for customers. [1]"),
    ],
)
def test_the_sentence_that_answers_is_chosen(
    question: str, sources: list[SearchResult], expected: str
) -> None:
    assert extractive_answer(question, sources) == expected


def test_decimals_and_abbreviations_stay_in_their_sentence() -> None:
    sources = [
        result(
            1,
            "Dr. Sari memimpin bengkel di Jl. Sudirman No. 5. Tangki berisi 1.5 liter oli. "
            "Harga paket Rp. 1.250.000 sudah termasuk pajak.",
        )
    ]
    assert extractive_answer("berapa liter oli di tangki?", sources, max_sentences=1) == (
        "Tangki berisi 1.5 liter oli. [1]"
    )
    assert extractive_answer("harga paket", sources, max_sentences=1) == (
        "Harga paket Rp. 1.250.000 sudah termasuk pajak. [1]"
    )
    assert extractive_answer("siapa memimpin bengkel", sources, max_sentences=1) == (
        "Dr. Sari memimpin bengkel di Jl. Sudirman No. 5. [1]"
    )


def test_catalog_and_financing_lines() -> None:
    sources = [
        result(
            1,
            "Honda Civic RS (SKU HC-RS)\nPrice: Rp 550.000.000\nengine: 1.5L turbo\n"
            "color: red, white",
            kind="catalog",
            title="Honda Civic RS",
        ),
        result(
            2,
            "Installments for Honda Civic RS, price Rp 550.000.000:\n"
            "- BCA Finance, 12 months, flat 5.00%/year, down payment Rp 110.000.000: "
            "Rp 38.500.000 per month\n"
            "- BCA Finance, 36 months, flat 6.00%/year, down payment Rp 110.000.000: "
            "Rp 14.400.000 per month",
            kind="financing",
            title="Installments: Honda Civic RS",
        ),
        result(3, "Honda Civic RS adalah sedan sporty dari Honda."),
    ]
    assert extractive_answer("harganya berapa?", sources[:1]) == "Price: Rp 550.000.000 [1]"
    assert extractive_answer("what colors does it come in?", sources) == "color: red, white [1]"
    assert extractive_answer("cicilan honda civic rs 36 bulan", sources, max_sentences=1) == (
        "- BCA Finance, 36 months, flat 6.00%/year, down payment Rp 110.000.000: "
        "Rp 14.400.000 per month [2]"
    )
    # A line names the product through its title; lines stand on their own lines.
    assert extractive_answer("berapa harga honda civic rs", sources) == (
        "Honda Civic RS (SKU HC-RS) [1]\nPrice: Rp 550.000.000 [1]\n"
        "Installments for Honda Civic RS, price Rp 550.000.000: [2]"
    )


def test_ties_go_to_the_earlier_source_and_at_least_one_sentence_is_given() -> None:
    sources = [result(1, "Tidak relevan."), result(2, "Promo berlaku."), result(3, "Promo habis.")]
    assert extractive_answer("promo", sources, max_sentences=1) == "Promo berlaku. [2]"
    assert extractive_answer("promo", sources) == "Promo berlaku. [2] Promo habis. [3]"
    assert extractive_answer("siapa presiden pertama?", sources) == "Tidak relevan. [1]"
    assert extractive_answer("apa?", [result(1, "  \n"), result(2, "Ada.")]) == "Ada. [2]"
    assert extractive_answer("apa?", [result(1, " ")]) == ""
    assert extractive_answer("apa?", []) == ""


def test_the_answer_cites_only_real_sources_and_is_deterministic() -> None:
    # Reference marks in the source text itself are not citations of the answer.
    sources = [*INDONESIAN, result(4, "Garansi baterai 8 tahun [12]. Garansi cat 3 tahun [4].")]
    answer = extractive_answer("garansi berapa tahun?", sources)
    assert answer == extractive_answer("garansi berapa tahun?", sources)
    assert "[12]" not in answer and "tahun [4]" not in answer
    marks = CitationFilter(len(sources))
    assert marks.feed(answer) + marks.flush() == answer
    assert marks.cited == [2, 4] and marks.invented == []


def test_a_sentence_that_overlapping_chunks_share_is_said_once() -> None:
    """Neighbouring chunks of a document share sentences: the answer says one once, cited to the
    first source holding it, and takes the next best sentence instead of the copy."""
    shared = "Run cari db dump FILE to back up the database."
    sources = [
        result(1, f"Backups are plain SQL. {shared}"),
        result(2, f"{shared} Restore one with cari db restore FILE to load the database."),
    ]
    answer = extractive_answer("how do I back up the database?", sources)
    assert answer.count(shared) == 1, answer
    assert f"{shared} [1]" in answer


def test_the_strongest_source_leads_and_a_weak_one_does_not_outweigh_it() -> None:
    """A weak source (0.18) holding both words of the question once outranked a moderate one
    (0.33) holding one: its sentence was the whole answer."""
    sources = [
        result(1, "Neoplasm immunology in a simulation of biochemical systems.", relevance=0.18),
        result(2, "Immunology studies of tumour growth.", relevance=0.33),
    ]
    answer = extractive_answer("neoplasm immunology", sources)
    assert answer.startswith("Immunology studies of tumour growth. [2]")
    # With none holding a word of the question, the strongest source's first sentence.
    assert extractive_answer("orbital mechanics", sources).endswith("[2]")
