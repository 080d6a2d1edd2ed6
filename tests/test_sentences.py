"""One sentence rule for the chunker and the extractive answer (cari.sentences)."""

from __future__ import annotations

from cari import sentences
from cari.answer.extractive import extractive_answer
from cari.ingest.chunking import chunk_document
from cari.ingest.formats import Section
from tests.test_extractive import result


def test_ends_and_what_is_not_an_end() -> None:
    text = (
        "Dr. Sari memimpin bengkel di Jl. Sudirman No. 5. Keluarga Ny. Brotoamidjojo dan "
        "R.G. Moerdani datang. Harga Rp. 1.250.000 (e.g. pajak) sudah termasuk! Apa lagi? "
        'Kata "tamat." Penyakit itu sendiri.[4] Charles I datang.[1][2] lalu pergi… Selesai'
    )
    assert sentences.split(text) == [
        "Dr. Sari memimpin bengkel di Jl. Sudirman No. 5.",
        "Keluarga Ny. Brotoamidjojo dan R.G. Moerdani datang.",
        "Harga Rp. 1.250.000 (e.g. pajak) sudah termasuk!",
        "Apa lagi?",
        'Kata "tamat."',
        "Penyakit itu sendiri.[4]",
        "Charles I datang.[1][2]",  # the next sentence's case is not asked
        "lalu pergi…",
        "Selesai",
    ]


def test_lower_case_text_is_cut_into_sentences_by_both() -> None:
    """Cranfield's abstracts are lower case: the extractive answer used to see one sentence."""
    text = (
        "the flow past a sphere is studied . surface temperature is assumed constant . "
        "results are presented for the heat transfer ."
    )
    answer = extractive_answer("surface temperature", [result(1, text)], max_sentences=1)
    assert answer == "surface temperature is assumed constant . [1]"
    chunks = chunk_document(
        [Section(text)],
        title="",
        count_tokens=lambda t: len(t.split()),
        max_tokens=12,
        min_tokens=4,
        overlap_tokens=0,
    )
    assert [c.content for c in chunks] == [
        "the flow past a sphere is studied .",
        "surface temperature is assumed constant .",
        "results are presented for the heat transfer .",
    ]
