from decimal import Decimal

import pytest

from cari.search.installments import Installment, RateType, monthly_payment

D = Decimal

CASES = [
    # flat: interest 300,000,000 * 0.05 * 36 / 12 = 45,000,000;
    # monthly (300,000,000 + 45,000,000) / 36 = 9,583,333.333... -> 9,583,333.33;
    # total 9,583,333.33 * 36 = 344,999,999.88, so the rounded interest is 44,999,999.88
    (
        (D(300_000_000), D("0.05"), 36, "flat"),
        Installment(36, D(300_000_000), D("9583333.33"), D("344999999.88"), D("44999999.88")),
    ),
    # annuity: i = 0.06 / 12 = 0.005; 1.005 ** 12 = 1.0616778118645;
    # 100,000 * 0.005 / (1 - 1 / 1.0616778118645) = 500 / 0.0580946 = 8,606.643 -> 8,606.64;
    # total 8,606.64 * 12 = 103,279.68
    (
        (D(100_000), D("0.06"), 12, "annuity"),
        Installment(12, D(100_000), D("8606.64"), D("103279.68"), D("3279.68")),
    ),
    # annuity on the flat example: i = 0.05 / 12; (1 + i) ** 36 = 1.1614722313;
    # 300,000,000 * 0.0041666667 / (1 - 1 / 1.1614722313) = 1,250,000 / 0.1390235 = 8,991,269.13;
    # total * 36 = 323,685,688.68: bank interest is about half the flat interest
    (
        (D(300_000_000), D("0.05"), 36, "annuity"),
        Installment(36, D(300_000_000), D("8991269.13"), D("323685688.68"), D("23685688.68")),
    ),
    # rate 0: 1,200,000 / 12 = 100,000 in both kinds
    (
        (D(1_200_000), D(0), 12, "flat"),
        Installment(12, D(1_200_000), D("100000.00"), D("1200000.00"), D("0.00")),
    ),
    (
        (D(1_200_000), D(0), 12, "annuity"),
        Installment(12, D(1_200_000), D("100000.00"), D("1200000.00"), D("0.00")),
    ),
    # one month: flat 1,000 + 1,000 * 0.12 / 12 = 1,010;
    # annuity i = 0.01, 1,000 * 0.01 / (1 - 1 / 1.01) = 10 / (0.01 / 1.01) = 1,010
    (
        (D(1000), D("0.12"), 1, "flat"),
        Installment(1, D(1000), D("1010.00"), D("1010.00"), D("10.00")),
    ),
    (
        (D(1000), D("0.12"), 1, "annuity"),
        Installment(1, D(1000), D("1010.00"), D("1010.00"), D("10.00")),
    ),
    # half-up, not half-even: 1 / 8 = 0.125 -> 0.13; total 0.13 * 8 = 1.04
    ((D(1), D(0), 8, "flat"), Installment(8, D(1), D("0.13"), D("1.04"), D("0.04"))),
    # nothing financed: nothing to pay
    ((D(0), D("0.1"), 12, "annuity"), Installment(12, D(0), D("0.00"), D("0.00"), D("0.00"))),
]


@pytest.mark.parametrize(("arguments", "expected"), CASES)
def test_monthly_payment(
    arguments: tuple[Decimal, Decimal, int, RateType], expected: Installment
) -> None:
    assert monthly_payment(*arguments) == expected


def test_flat_interest_is_on_the_original_principal_for_the_whole_tenor() -> None:
    # 100,000,000 * 0.085 * 60 / 12 = 42,500,000 interest; (100,000,000 + 42,500,000) / 60
    # = 2,375,000 exactly, so nothing is lost to rounding
    installment = monthly_payment(D(100_000_000), D("0.085"), 60, "flat")
    assert installment.monthly == D("2375000.00")
    assert installment.interest == D(42_500_000)


def test_result_is_rounded_once_at_the_end() -> None:
    # 1,000,000 * (0.07 / 12) / (1 - (1 + 0.07 / 12) ** -60) = 19,801.1985 -> 19,801.20; rounding
    # i = 0.0058333... to 0.0058 first would give 19,782.33 instead.
    assert monthly_payment(D(1_000_000), D("0.07"), 60, "annuity").monthly == D("19801.20")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ((D(-1), D("0.05"), 12, "flat"), "principal"),
        ((D("NaN"), D("0.05"), 12, "flat"), "principal"),
        ((D(1000), D("-0.01"), 12, "annuity"), "yearly rate"),
        ((D(1000), D("Infinity"), 12, "annuity"), "yearly rate"),
        ((D(1000), D("0.05"), 0, "flat"), "at least 1 month"),
        ((D(1000), D("0.05"), -12, "annuity"), "at least 1 month"),
        ((D(1000), D("0.05"), 12, "balloon"), "rate type"),
    ],
)
def test_invalid_arguments_are_rejected(
    arguments: tuple[Decimal, Decimal, int, str], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        monthly_payment(*arguments)  # type: ignore[arg-type]
