"""Monthly installments of a loan, computed in decimal arithmetic and rounded once, at the end.

flat:    monthly = (principal + principal * yearly_rate * months / 12) / months
annuity: monthly = principal * i / (1 - (1 + i) ** -months) with i = yearly_rate / 12
(at rate 0 both are principal / months).

"flat" is what Indonesian leasing companies quote (bunga flat: interest on the original principal
for the whole tenor); "annuity" is the usual bank loan (interest on the remaining balance).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, localcontext
from typing import Literal

RateType = Literal["flat", "annuity"]

_CENT = Decimal("0.01")


@dataclass(frozen=True, slots=True)
class Installment:
    months: int
    principal: Decimal  # amount financed
    monthly: Decimal  # monthly payment, rounded half-up to 2 decimals
    total: Decimal  # monthly * months (of the rounded monthly)
    interest: Decimal  # total - principal


def monthly_payment(
    principal: Decimal, yearly_rate: Decimal, months: int, rate_type: RateType
) -> Installment:
    """The monthly payment that repays `principal` in `months` at `yearly_rate` (0.085 = 8.5 %)."""
    if not principal.is_finite() or principal < 0:
        raise ValueError(f"principal must be a finite amount of at least 0, not {principal}")
    if not yearly_rate.is_finite() or yearly_rate < 0:
        raise ValueError(f"yearly rate must be a finite fraction of at least 0, not {yearly_rate}")
    if months < 1:
        raise ValueError(f"tenor must be at least 1 month, not {months}")
    with localcontext() as context:
        context.prec = 50
        if rate_type == "flat":
            exact = (principal + principal * yearly_rate * months / 12) / months
        elif rate_type == "annuity":
            i = yearly_rate / 12
            exact = principal / months if i == 0 else principal * i / (1 - (1 + i) ** -months)
        else:
            raise ValueError(f"rate type must be 'flat' or 'annuity', not {rate_type!r}")
        monthly = exact.quantize(_CENT, rounding=ROUND_HALF_UP)
        total = monthly * months
        return Installment(months, principal, monthly, total, total - principal)
