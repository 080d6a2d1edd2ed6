import pytest

from cari.schema.search import ExactToken
from cari.search.signals import Signal, detect

FOUND = [
    # SKUs and product codes
    ("harga SKU-9942-X berapa?", [("SKU-9942-X", "sku")]),
    ("AB-1234 masih ada stok?", [("AB-1234", "sku")]),
    ("review Sony RX100-II", [("RX100-II", "sku")]),
    ("XJ9000 vs XJ8000", [("XJ9000", "sku"), ("XJ8000", "sku")]),
    ("part number SM-S921B, original?", [("SM-S921B", "sku")]),
    ("(9942-X)", [("9942-X", "sku")]),
    # error codes
    ("kenapa muncul ERR_CONNECTION_REFUSED", [("ERR_CONNECTION_REFUSED", "error_code")]),
    ("E_ACCESS_DENIED when saving", [("E_ACCESS_DENIED", "error_code")]),
    ("socket hang up ECONNRESET", [("ECONNRESET", "error_code")]),
    ("getaddrinfo ENOTFOUND api.example.com", [("ENOTFOUND", "error_code")]),
    ("Windows update gagal 0x80070005", [("0x80070005", "error_code")]),
    ("printer shows E1234", [("E1234", "error_code")]),
    ("ORA-00942: table or view does not exist", [("ORA-00942", "error_code")]),
    # ids
    (
        "order 550e8400-e29b-41d4-a716-446655440000 not found",
        [("550e8400-e29b-41d4-a716-446655440000", "uuid")],
    ),
    (
        "UUID 550E8400-E29B-41D4-A716-446655440000",
        [("550E8400-E29B-41D4-A716-446655440000", "uuid")],
    ),
    ("which release has commit a3f9c2e1?", [("a3f9c2e1", "hex_id")]),
    (
        "see github.com/x/y/commit/9fceb02d0ae598e95dc970b74767f19372d61af8",
        [("9fceb02d0ae598e95dc970b74767f19372d61af8", "hex_id")],
    ),
    # versions
    ("what changed in v2.3.1", [("v2.3.1", "version")]),
    ("upgrade ke 2.14.1 aman?", [("2.14.1", "version")]),
    ("PostgreSQL versi 18.6 sudah rilis", [("18.6", "version")]),
    ("release notes for version 1.0.", [("1.0", "version")]),
    ("bug di v1.2.0-beta.1", [("v1.2.0-beta.1", "version")]),
    # several kinds, order of appearance, each once
    (
        "ERR_SSL di v3.1 untuk SKU-1000-A dan SKU-1000-A",
        [("ERR_SSL", "error_code"), ("v3.1", "version"), ("SKU-1000-A", "sku")],
    ),
]

NOT_FOUND = [
    "berapa harga mobil honda terbaru?",
    "What is the best hybrid car for a family?",
    "KENAPA mesin susah hidup di pagi hari",
    "HARGA TOYOTA AVANZA BERAPA",
    "ENAK mana, Honda atau Toyota?",
    "mobil keluaran 2024",
    "promo tahun 2023-2024",
    "harga 250 juta",
    "cicilan Rp 1,2 M per bulan",
    "harga Rp 1.500.000",
    "budget 250.000.000 cukup?",
    "RP250000 sudah termasuk pajak?",
    "diskon 250RB untuk pembelian pertama",
    "layar 1080P atau 4K",
    "konsumsi 5KG per hari",
    "berat 2.5 kg",
    "rating 4.5 dari 5",
    "buka jam 10.30",
    "jadwal servis 17.08.2024",
    "dampak COVID-19 pada penjualan mobil",
    "hasil KTT G20 di Bali",
    "masker N95 atau biasa",
    "ULANG TAHUN KE-100",
    "MOBIL TAHUN 1990-AN",
    "Honda HR-V dan CR-V",
    "mesin V8 atau V6",
    "iPhone15 atau Galaxy S24",
    "the 2nd and 3rd generation",
    "sku-9942-x",
    "paper size A4",
    "USB3 cable",
    "call 0812-3456-7890",
    "",
]


@pytest.mark.parametrize(("query", "expected"), FOUND)
def test_exact_tokens_are_found(query: str, expected: list[tuple[str, str]]) -> None:
    signal = detect(query)
    assert [(t.text, t.kind) for t in signal.exact_tokens] == expected
    assert signal.name == "exact_token"


@pytest.mark.parametrize("query", NOT_FOUND)
def test_natural_language_has_no_exact_tokens(query: str) -> None:
    assert detect(query) == Signal(())
    assert detect(query).name == "general"


def test_tokens_are_not_found_inside_longer_words() -> None:
    assert detect("kodeSKU-9942-Xé dan café0x80070005") == Signal(())


def test_exact_token_keeps_the_query_spelling() -> None:
    assert detect("Lihat V2.0.1!").exact_tokens == (ExactToken("V2.0.1", "version"),)
