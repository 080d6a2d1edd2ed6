"""Numbered sources, the answer prompt, language detection and the streaming citation filter."""

from __future__ import annotations

import re
from typing import Any

import msgspec
import pytest

from cari.answer.citations import (
    NO_INFORMATION,
    CitationFilter,
    Language,
    build_messages,
    citation,
    detect_language,
    system_prompt,
)
from cari.schema.answer import Citation
from cari.schema.search import ResultKind, SearchResult


def result(
    id: str, kind: ResultKind, title: str, content: str, metadata: dict[str, Any] | None = None
) -> SearchResult:
    chunk = int(id.split(":")[1]) if kind == "chunk" else None
    return SearchResult(
        id=id,
        kind=kind,
        title=title,
        content=content,
        metadata=metadata or {},
        score=0.5,
        relevance=0.8,
        band="strong",
        retrievers={},
        chunk_id=chunk,
        document_id="doc-1" if kind == "chunk" else None,
    )


SOURCES = [
    result("catalog:HC-RS", "catalog", "Honda Civic RS", "Honda Civic RS (SKU HC-RS)\nPrice: Rp 1"),
    result("chunk:12", "chunk", "Garansi", "Garansi mesin 5 tahun.", {"source": "garansi.pdf"}),
    result("chunk:40", "chunk", "Warranty", "The engine warranty lasts 5 years."),
]


def test_citation_of_a_chunk() -> None:
    content = "Garansi   mesin\n\nberlaku 5 tahun. " + "Kata " * 100
    found = citation(2, result("chunk:12", "chunk", "Garansi", content, {"source": "g.pdf"}))
    assert found.number == 2 and found.id == "chunk:12" and found.kind == "chunk"
    assert (found.document_id, found.chunk_id) == ("doc-1", 12)
    assert found.title == "Garansi" and found.source == "g.pdf"
    assert found.snippet.startswith("Garansi mesin berlaku 5 tahun. Kata Kata")
    assert found.snippet.endswith("Kata…") and len(found.snippet) <= 201


def test_citation_of_a_catalog_item_serialises() -> None:
    found = citation(1, SOURCES[0])
    assert found == Citation(
        1, "catalog:HC-RS", "catalog", None, None, "Honda Civic RS", None,
        "Honda Civic RS (SKU HC-RS) Price: Rp 1", SOURCES[0].relevance, SOURCES[0].band,
    )  # fmt: skip
    data = msgspec.to_builtins(found)
    assert data["snippet"] == "Honda Civic RS (SKU HC-RS) Price: Rp 1"
    assert msgspec.convert(data, Citation) == found


@pytest.mark.parametrize(
    ("question", "language"),
    [
        ("Berapa harga Honda Civic?", "id"),
        ("Apa syarat pengajuan kredit motor?", "id"),
        ("bagaimana cara klaim garansi", "id"),
        ("cicilan iPhone 15 per bulan berapa ya", "id"),
        ("Apakah ada promo untuk motor listrik?", "id"),
        ("Kapan toko di Bandung buka?", "id"),
        ("spesifikasinya gimana", "id"),
        ("harganya?", "id"),
        ("Honda Civic", "id"),  # no function word either way: a tie
        ("", "id"),
        ("What is the price of the Honda Civic?", "en"),
        ("How do I claim the warranty?", "en"),
        ("Is there a promo for electric scooters?", "en"),
        ("When does the store in Bandung open?", "en"),
        ("monthly installment for iPhone 15 with 20% down", "en"),
        ("Does it support Bluetooth?", "en"),
    ],
)
def test_detect_language(question: str, language: str) -> None:
    assert detect_language(question) == language


@pytest.mark.parametrize(
    ("question", "tie", "language"),
    [
        # A title in the other language inside the question says nothing of its language.
        ("tahun berapakah The Greatest Showman dirilis?", "id", "id"),
        ("tahun berapakah The Greatest Showman dirilis?", "en", "id"),
        ("siapakah pemeran utama The Lord of the Rings", "en", "id"),
        ("who directed Ada Apa Dengan Cinta?", "id", "en"),
        # No function word either way: the collection's language.
        ("Honda Civic", "en", "en"),
        ("Honda Civic", "id", "id"),
        ("tahun rilis Greatest Showman", "id", "id"),
    ],
)
def test_the_collection_decides_a_tie_and_names_say_nothing(
    question: str, tie: Language, language: str
) -> None:
    assert detect_language(question, tie=tie) == language


@pytest.mark.parametrize("language", ["id", "en"])
def test_system_prompt(language: Any) -> None:
    prompt = system_prompt(language)
    assert ("Indonesian" if language == "id" else "English") in prompt
    assert NO_INFORMATION[language] in prompt
    assert "[1]" in prompt and "only" in prompt


def test_messages_hold_every_numbered_source_then_the_question() -> None:
    messages = build_messages("Berapa lama garansi mesin?", SOURCES, "id")
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"] == system_prompt("id")
    user = messages[1]["content"]
    for number, source in enumerate(SOURCES, 1):
        assert f"[{number}] {source.title}\n{source.content}" in user
    assert user.index("[1]") < user.index("[2]") < user.index("[3]")
    assert user.endswith("Pertanyaan: Berapa lama garansi mesin?")
    english = build_messages("How long is the warranty?", SOURCES[2:], "en")[1]["content"]
    assert english.startswith("Sources:\n\n[1] Warranty\n")
    assert english.endswith("Question: How long is the warranty?")


def run(text: str, valid: int, pieces: list[str] | None = None) -> tuple[str, list[int], list[int]]:
    marks = CitationFilter(valid)
    out = "".join(marks.feed(piece) for piece in (pieces or [text])) + marks.flush()
    return out, marks.cited, marks.invented


CASES = [
    # text, sources, shown, cited, invented
    ("Harga Rp 550 juta [1].", 3, "Harga Rp 550 juta [1].", [1], []),
    ("Harga Rp 550 juta [7].", 3, "Harga Rp 550 juta.", [], [7]),
    ("Garansi 5 tahun [0] dan servis gratis [2].", 3, "Garansi 5 tahun dan servis gratis [2].",
     [2], [0]),
    ("Five years [2][9] and free service [1].", 3, "Five years [2] and free service [1].",
     [2, 1], [9]),
    ("Five years [9][2], free [3][1].", 3, "Five years [2], free [3][1].", [2, 3, 1], [9]),
    ("A [3] B [1] C [3] D [2]", 3, "A [3] B [1] C [3] D [2]", [3, 1, 2], []),
    ("A [1, 2] B [1,3] C [2, 9]", 3, "A [1, 2] B [1,3] C [2]", [1, 2, 3], [9]),
    ("A [2-3] B [2-5]", 3, "A [2-3] B [2, 3]", [2, 3], [4, 5]),
    ("A [8] [9] B [4]!", 3, "A B!", [], [8, 9, 4]),
    ("[5] Jawabannya ya [1].", 3, "Jawabannya ya [1].", [1], [5]),
    ("Satu [1].\n\n[6] Dua [2].\n- tiga [7]\n- empat", 2, "Satu [1].\n\nDua [2].\n- tiga\n- empat",
     [1, 2], [6, 7]),
    ("(see [4]) and [5], done", 3, "(see) and, done", [], [4, 5]),
    ("Not markers: [a], [1.5], [ ], [1234], [2", 3, "Not markers: [a], [1.5], [ ], [1234], [2",
     [], []),
    ("Tail [9]", 3, "Tail", [], [9]),
    ("Tail [9] \n", 3, "Tail\n", [], [9]),
    ("", 3, "", [], []),
]  # fmt: skip


@pytest.mark.parametrize(("text", "valid", "shown", "cited", "invented"), CASES)
def test_filter_on_a_whole_text(
    text: str, valid: int, shown: str, cited: list[int], invented: list[int]
) -> None:
    assert run(text, valid) == (shown, cited, invented)


@pytest.mark.parametrize(("text", "valid", "shown", "cited", "invented"), CASES)
def test_filter_is_the_same_whatever_the_cuts(
    text: str, valid: int, shown: str, cited: list[int], invented: list[int]
) -> None:
    expected = (shown, cited, invented)
    for cut in range(len(text) + 1):
        assert run(text, valid, [text[:cut], text[cut:]]) == expected, cut
    assert run(text, valid, list(text)) == expected


@pytest.mark.parametrize(("text", "valid", "shown", "cited", "invented"), CASES)
def test_filter_leaves_spaces_tidy(
    text: str, valid: int, shown: str, cited: list[int], invented: list[int]
) -> None:
    if invented:
        assert "  " not in shown
        assert not re.search(r" [.,;:!?)]", shown)
        assert not shown.startswith(" ") and not re.search(r" \n", shown)


def test_a_split_marker_is_held_until_complete() -> None:
    marks = CitationFilter(12)
    assert marks.feed("Lihat [1") == "Lihat"
    assert marks.feed("2") == ""
    assert marks.feed("] dan [") == " [12] dan"
    assert marks.feed("13] juga.") == " juga."
    assert marks.flush() == ""
    assert (marks.cited, marks.invented) == ([12], [13])
