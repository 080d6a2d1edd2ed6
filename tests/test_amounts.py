import subprocess
import sys
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cari.search.amounts import FinancingTerms, parse_amount, parse_financing

D = Decimal

AMOUNTS: list[tuple[str, Decimal | None]] = [
    # magnitude words, attached or not
    ("50 juta", D(50_000_000)),
    ("50jt", D(50_000_000)),
    ("50 jutaan", D(50_000_000)),
    ("250rb", D(250_000)),
    ("250 ribu", D(250_000)),
    ("$30k", D(30_000)),
    ("30K", D(30_000)),
    ("5 thousand", D(5_000)),
    ("1.2m", D(1_200_000)),
    ("3 mio", D(3_000_000)),
    ("4 mn", D(4_000_000)),
    ("USD 1.5 million", D(1_500_000)),
    ("Rp1.2 miliar", D(1_200_000_000)),
    ("1,5 milyar", D(1_500_000_000)),
    ("2 bn", D(2_000_000_000)),
    ("2 billion", D(2_000_000_000)),
    ("3 triliun", D(3_000_000_000_000)),
    ("3T", D(3_000_000_000_000)),
    ("1 trillion", D(1_000_000_000_000)),
    # currencies before or after
    ("Rp 250.000", D(250_000)),
    ("Rp 250.000.000", D(250_000_000)),
    ("Rp. 250.000,-", D(250_000)),
    ("IDR 5jt", D(5_000_000)),
    ("50 juta rupiah", D(50_000_000)),
    ("$30,000", D(30_000)),
    ("US$ 30k", D(30_000)),
    ("€30k", D(30_000)),
    ("30k USD", D(30_000)),
    # plain numbers
    ("20.5", D("20.5")),
    ("0", D(0)),
    ("  1,2  ", D("1.2")),
]

SEPARATORS: list[tuple[str, Decimal | None]] = [
    # '.' or ',' before exactly three digits groups thousands, any other one is decimal
    ("250.000", D(250_000)),
    ("30,000", D(30_000)),
    ("1.500.000", D(1_500_000)),
    ("1,000,000", D(1_000_000)),
    ("1,2", D("1.2")),
    ("1.2", D("1.2")),
    ("20,55", D("20.55")),
    ("0.500", D("0.5")),  # no grouped number starts with a lone 0
    # both kinds: the last one is the decimal point
    ("Rp 250.000,00", D(250_000)),
    ("1.234,56", D("1234.56")),
    ("1,234.56", D("1234.56")),
    ("1,234,567.89", D("1234567.89")),
    # groupings that fit neither reading
    ("1234.567", None),
    ("1.2.3", None),
    ("1,23,456", None),
    ("1.234,5.6", None),
]

M_RULE: list[tuple[str, Decimal | None]] = [
    # Rupiah: M is miliar
    ("Rp 1,2 M", D(1_200_000_000)),
    ("Rp 5M", D(5_000_000_000)),
    ("IDR 2 m", D(2_000_000_000)),
    ("1,2 M rupiah", D(1_200_000_000)),
    # $, USD, EUR: M is million
    ("$1.2M", D(1_200_000)),
    ("USD 5M", D(5_000_000)),
    ("EUR 3 M", D(3_000_000)),
    ("€2m", D(2_000_000)),
    # no currency at all: million
    ("1,2 M", D(1_200_000)),
]

NOT_AMOUNTS = [
    "-5 juta",
    "Rp -5 juta",
    "-Rp 5 juta",
    "\u22125jt",  # minus sign
    "-20.5",
    "",
    "   ",
    "abc",
    "juta",
    "Rp",
    "20%",
    "5-10 juta",
    "lima puluh juta",
    "50 juta 60 juta",
    "50 jutawan",
    "1e6",
]


@pytest.mark.parametrize(("text", "expected"), AMOUNTS + SEPARATORS + M_RULE)
def test_parse_amount(text: str, expected: Decimal | None) -> None:
    assert parse_amount(text) == expected


@pytest.mark.parametrize("text", NOT_AMOUNTS)
def test_not_an_amount(text: str) -> None:
    assert parse_amount(text) is None


def test_amounts_are_exact_and_without_trailing_zeros() -> None:
    assert str(parse_amount("Rp 1,2 M")) == "1200000000"
    assert str(parse_amount("Rp 250.000,00")) == "250000"
    assert str(parse_amount("20.50")) == "20.5"


def terms(
    down_payment: Decimal | None = None,
    share: str | None = None,
    tenors: tuple[int, ...] = (),
    price: Decimal | None = None,
    notes: tuple[str, ...] = (),
) -> FinancingTerms:
    return FinancingTerms(down_payment, None if share is None else D(share), tenors, price, notes)


FINANCING = [
    # the two routing examples
    (
        "cicilan honda civic dp 50 juta tenor 3 tahun",
        terms(down_payment=D(50_000_000), tenors=(36,)),
    ),
    (
        "monthly payment for the X200 with $5k down over 36 months",
        terms(down_payment=D(5_000), tenors=(36,)),
    ),
    # down payment cues, ID and EN, amounts and percents
    ("DP 50jt", terms(down_payment=D(50_000_000))),
    ("d.p. Rp 25.000.000", terms(down_payment=D(25_000_000))),
    ("dp: Rp50.000.000", terms(down_payment=D(50_000_000))),
    ("dp-nya sebesar 30 juta", terms(down_payment=D(30_000_000))),
    ("uang muka 20%", terms(share="0.2")),
    ("uang muka minimal 15 persen", terms(share="0.15")),
    ("down payment of 20 percent", terms(share="0.2")),
    ("downpayment $6,000", terms(down_payment=D(6_000))),
    ("deposit $5,000", terms(down_payment=D(5_000))),
    ("20% down", terms(share="0.2")),
    ("put 12,5% down payment", terms(share="0.125")),
    ("dp 0", terms(down_payment=D(0))),
    ("uang muka 0%", terms(share="0")),
    ("dp 100%", terms(share="1")),
    ("dp 10jt atau 20%", terms(down_payment=D(10_000_000))),
    ("dp 20% (60 juta)", terms(share="0.2")),
    # tenors: cues, units, bare forms
    ("tenor 36", terms(tenors=(36,))),
    ("tenor: 24 bln", terms(tenors=(24,))),
    ("tenor 36x", terms(tenors=(36,))),
    ("tenor 3th", terms(tenors=(36,))),
    ("jangka waktunya 5 thn", terms(tenors=(60,))),
    ("selama 2 tahun", terms(tenors=(24,))),
    ("x 36 bulan", terms(tenors=(36,))),
    ("over 5 years", terms(tenors=(60,))),
    ("for 48 mo", terms(tenors=(48,))),
    ("3 th", terms(tenors=(36,))),
    ("36 bulan", terms(tenors=(36,))),
    ("36 months", terms(tenors=(36,))),
    ("2 yrs", terms(tenors=(24,))),
    ("1,5 tahun", terms(tenors=(18,))),
    # several tenors, in order of appearance, each once
    ("12 atau 24 bulan", terms(tenors=(12, 24))),
    ("cicilan 12, 24 atau 36 bulan", terms(tenors=(12, 24, 36))),
    ("12/24/36 bln", terms(tenors=(12, 24, 36))),
    ("2 or 3 years", terms(tenors=(24, 36))),
    ("12, 24, or 36 months", terms(tenors=(12, 24, 36))),
    ("tenor 24 bulan atau 3 tahun", terms(tenors=(24, 36))),
    ("jangka waktu 12 atau 24", terms(tenors=(12, 24))),
    ("36 bulan, 12 bulan, 36 bulan", terms(tenors=(36, 12))),
    # prices
    ("budget 300 juta", terms(price=D(300_000_000))),
    ("harga Rp 250jt", terms(price=D(250_000_000))),
    ("harga otr Rp 275.500.000", terms(price=D(275_500_000))),
    ("otr 250 juta", terms(price=D(250_000_000))),
    ("mobil seharga 1,2 miliar", terms(price=D(1_200_000_000))),
    ("price: $30k", terms(price=D(30_000))),
    ("budget max 300jt", terms(price=D(300_000_000))),
    ("price $30k down payment $5k", terms(down_payment=D(5_000), price=D(30_000))),
    # everything at once
    (
        "harga Rp 300 jt, dp 20%, tenor 12, 24 atau 36 bulan",
        terms(share="0.2", tenors=(12, 24, 36), price=D(300_000_000)),
    ),
    (
        "price $45,000 with 10% down over 4 or 5 years",
        terms(share="0.1", tenors=(48, 60), price=D(45_000)),
    ),
    # M by the query's context: Indonesian words or Rupiah mean miliar, English or $ million
    ("harga 1,2 M dp 20%", terms(share="0.2", price=D(1_200_000_000))),
    ("budget 1,5 M tenor 5 tahun", terms(tenors=(60,), price=D(1_500_000_000))),
    ("price 1.2M, 20% down payment", terms(share="0.2", price=D(1_200_000))),
    ("price 1.5M rupiah", terms(price=D(1_500_000_000))),
    ("harga $1.2M", terms(price=D(1_200_000))),
    # the value before a claimed amount is not a tenor list
    ("dp 50, 36 bulan", terms(down_payment=D(50), tenors=(36,))),
]

PRODUCT_NUMBERS = [
    "harga honda civic 2024",
    "iphone 15 pro",
    "harga iphone 15 pro max",
    "review X200",
    "berapa dp honda civic 2024?",
    "the 5th gen civic",
    "samsung galaxy s24 256gb",
    "",
]

NOTES = [
    (
        "dp lima puluh juta",
        terms(notes=("down payment 'lima puluh juta' not understood; ignored",)),
    ),
    ("dp abc", terms(notes=("down payment 'abc' not understood; ignored",))),
    (
        "dp abc, tenor 3 tahun",
        terms(tenors=(36,), notes=("down payment 'abc' not understood; ignored",)),
    ),
    ("dp -5 juta", terms(notes=("down payment '-5 juta' is negative; ignored",))),
    ("uang muka -10%", terms(notes=("down payment '-10%' is negative; ignored",))),
    ("dp 120%", terms(notes=("down payment '120%' is not between 0 and 100 %; ignored",))),
    ("dp 100,5%", terms(notes=("down payment '100,5%' is not between 0 and 100 %; ignored",))),
    ("dp 5-10 juta", terms(notes=("down payment '5-10 juta' not understood; ignored",))),
    ("tenor 0 bulan", terms(notes=("tenor '0 bulan' is not between 1 and 600 months; ignored",))),
    ("100 tahun", terms(notes=("tenor '100 tahun' is not between 1 and 600 months; ignored",))),
    (
        "tenor 1000 bulan",
        terms(notes=("tenor '1000 bulan' is not between 1 and 600 months; ignored",)),
    ),
    (
        "tenor 1,3 tahun",
        terms(notes=("tenor '1,3 tahun' is not a whole number of months; ignored",)),
    ),
    ("tenor abc", terms(notes=("tenor 'abc' not understood; ignored",))),
    (
        "tenor 0 atau 12 bulan",
        terms(tenors=(12,), notes=("tenor '0 bulan' is not between 1 and 600 months; ignored",)),
    ),
    ("harga lima ratus juta", terms(notes=("price 'lima ratus juta' not understood; ignored",))),
    ("budget -5 juta", terms(notes=("price '-5 juta' is negative; ignored",))),
    (
        "dp 50 juta dp 60 juta",
        terms(
            down_payment=D(50_000_000),
            notes=("down payment '60 juta' ignored: one is given already",),
        ),
    ),
    # notes come in the order of the query
    (
        "tenor 0 bulan dp abc.",
        terms(
            notes=(
                "tenor '0 bulan' is not between 1 and 600 months; ignored",
                "down payment 'abc' not understood; ignored",
            )
        ),
    ),
    # questions about a term, or product names after a cue, are not bad values
    ("dp-nya berapa?", terms()),
    ("berapa dp dan tenor untuk civic", terms()),
    ("harga abc", terms()),
    ("dp", terms()),
]


@pytest.mark.parametrize(("query", "expected"), FINANCING + NOTES)
def test_parse_financing(query: str, expected: FinancingTerms) -> None:
    assert parse_financing(query) == expected


@pytest.mark.parametrize("query", PRODUCT_NUMBERS)
def test_product_numbers_are_not_terms(query: str) -> None:
    assert parse_financing(query) == terms()


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("cicilan honda civic 2024 dp 50 juta 3 tahun", terms(D(50_000_000), tenors=(36,))),
        ("iphone 15 pro cicilan 12 bulan", terms(tenors=(12,))),
        ("civic 2024, 3 tahun", terms(tenors=(36,))),
        ("X200 price $30k", terms(price=D(30_000))),
        ("iPhone 15 Pro 256GB harga Rp 20 jt", terms(price=D(20_000_000))),
    ],
)
def test_product_numbers_next_to_terms(query: str, expected: FinancingTerms) -> None:
    assert parse_financing(query) == expected


def test_cues_are_case_insensitive() -> None:
    assert parse_financing("DP 50 JUTA TENOR 3 TAHUN HARGA RP 300 JT") == terms(
        D(50_000_000), tenors=(36,), price=D(300_000_000)
    )


@pytest.mark.parametrize("query", ["1,1," * 1000, "12 atau " * 500, "1, " * 1500, "dp " * 1000])
def test_long_runs_stay_fast(query: str) -> None:
    """No regex here backtracks over a run of numbers: parsing takes milliseconds, where a
    backtracking pattern would take longer than anyone waits. Run in a process of its own,
    so such a pattern is stopped and the test fails instead of hanging; the bound is for that,
    not a speed (a 1 s bound is a benchmark's business, and fails on a busy machine)."""
    script = "import sys; from cari.search.amounts import parse_financing as p; p(sys.argv[1])"
    try:
        subprocess.run([sys.executable, "-c", script, query], check=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail(f"parsing {query[:20]!r}... did not end: it backtracks")


@given(st.text(max_size=200))
def test_parse_financing_never_raises(query: str) -> None:
    parse_financing(query)


@given(st.text(alphabet="0123456789.,-%$ dpRrMmkKjuta tenorbulahn", max_size=80))
def test_amount_like_text_never_raises(text: str) -> None:
    parse_amount(text)
    parse_financing(text)
