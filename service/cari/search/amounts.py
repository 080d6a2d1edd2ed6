"""Amounts of money and financing terms read from a query, in Indonesian and English.

Separators: a '.' or ',' followed by exactly three digits groups thousands ("250.000", "30,000"),
any other one is the decimal point ("1,2", "20.5"). With both kinds, the last one is the decimal
point ("1.234,56", "1,234.56"). A grouping that fits neither reading ("1234.567", "1.2.3") is no
amount.

Magnitudes: rb/ribu/k/thousand 1e3; jt/juta/million/mio/mn 1e6; miliar/milyar/billion/bn/b 1e9;
triliun/trillion/tn/t 1e12; "jutaan", "ribuan" read as juta, ribu.
"M" (either case) is miliar in a Rupiah context and million otherwise. The amount's own currency
decides first (Rp/IDR/rupiah: miliar; $/USD/EUR/€: million). Without one, `parse_financing` asks
the whole query: its first currency, else any Indonesian word ("juta", "harga", "bulan", ...)
means Rupiah. `parse_amount` alone has no such context and reads million ("1.2m").

`parse_financing` reads only amounts attached to a cue ("dp 50 juta", "harga Rp 250jt",
"$5k down") and tenors with a unit ("3 tahun", "36 months"), so that numbers in product names
("civic 2024", "iphone 15") are never taken for terms.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, localcontext

from cari.limits import MAX_TENOR_MONTHS


@dataclass(frozen=True, slots=True)
class FinancingTerms:
    down_payment: Decimal | None  # absolute amount ("dp 50 juta" -> 50000000)
    down_payment_share: Decimal | None  # fraction of the price ("uang muka 20%" -> 0.2)
    tenors_months: tuple[int, ...]  # in order of appearance, each once
    price: Decimal | None  # a price stated in the query ("budget 300 juta")
    notes: tuple[str, ...]  # human-readable notes on amounts that could not be read


_MAGNITUDES = {
    **dict.fromkeys(("ribu", "rb", "k", "thousand"), 10**3),
    **dict.fromkeys(("juta", "jt", "million", "mio", "mn"), 10**6),
    **dict.fromkeys(("miliar", "milyar", "billion", "bn", "b"), 10**9),
    **dict.fromkeys(("triliun", "trillion", "tn", "t"), 10**12),
}
_MAGNITUDE = (
    r"(?:ribu|juta|miliar|milyar|triliun)(?:-?an)?"
    r"|thousand|million|billion|trillion|mio|mn|bn|tn|rb|jt|[kmbt]"
)
_SIGN = r"[-\u2212\u2013]"
# Atomic: what follows a number never makes a shorter number of it, and the regexes stay
# linear on long runs of digits and separators. An atomic group, not possessive quantifiers:
# CPython before 3.11.3 (Debian 12's 3.11.2) fails a possessive repeat of a group holding a
# repeat ("Rp. 250.000,-" did not parse there).
_NUMBER = r"(?>[0-9]+(?:[.,][0-9]+)*)"
_AMOUNT_SOURCE = (
    rf"(?P<sign>{_SIGN}\s*)?(?P<prefix>(?:rp\.?|idr|us\$|usd|\$|eur|€)\s*)?(?P<sign2>{_SIGN}\s*)?"
    rf"(?P<number>{_NUMBER})(?:\s*(?P<magnitude>{_MAGNITUDE}))?"
    r"(?:\s*(?P<suffix>rupiah|idr|usd|dollars?|euros?|eur))?"
    r"(?:[.,]-)?"  # "Rp 250.000,-"
    r"(?![\w%\-\u2212\u2013])"  # not part of a word, a percent or a range ("5-10 juta")
)
_PERCENT_SOURCE = (
    rf"(?P<percent_sign>{_SIGN}\s*)?(?P<percent>{_NUMBER})\s*(?:%|persen|percent|pct)(?!\w)"
)
_VALUE_SOURCE = rf"(?:{_PERCENT_SOURCE}|{_AMOUNT_SOURCE})"
_AMOUNT = re.compile(_AMOUNT_SOURCE, re.IGNORECASE)
_VALUE = re.compile(_VALUE_SOURCE, re.IGNORECASE)
_RUPIAH = re.compile(r"rp|idr|rupiah", re.IGNORECASE)

# Words allowed between a cue and its value: "dp-nya sebesar 20%", "price: $30k", "max 300jt".
_FILLERS = (
    r"(?:\s*(?:[:=]|(?:of|is|sebesar|senilai|sekitar|kira-kira|around|about|approx\.?|cuma|hanya"
    r"|only|just|minimal|minimum|min\.?|maksimal|maks\.?|max\.?|at\s+least|at\s+most|up\s+to"
    r"|under|below|di\s+bawah|kurang\s+dari)(?!\w)))*\s*"
)
_DOWN_PAYMENT_CUE = re.compile(
    rf"(?<![\w.])(?:dp|d\.p\.|uang\s+muka|down[\s-]?payment|deposit)(?:-?nya)?(?!\w){_FILLERS}",
    re.IGNORECASE,
)
_PRICE_CUE = re.compile(
    rf"(?<![\w.])(?:harga(?:\s+otr)?|otr|seharga|price|priced\s+at|budget)(?:-?nya)?(?!\w){_FILLERS}",
    re.IGNORECASE,
)
# "$5k down", "20% down payment": the English form with the value before the cue.
_VALUE_BEFORE_DOWN = re.compile(
    rf"(?<![\w.,$€\-\u2212\u2013]){_VALUE_SOURCE}(?=\s+down(?:[\s-]*payment)?(?!\w))", re.IGNORECASE
)

_MONTHS = r"bulan|bln|bl|months?|mos?|mths?"
_YEARS = r"tahun|thn|years?|yrs?"
_TENOR_SEPARATOR = r"\s*(?:,\s*(?:(?:atau|or|dan|and)\s+)?|/\s*|&\s*|(?:atau|or|dan|and)\s+)"
_TENOR_NUMBER = re.compile(r"[0-9]+(?:[.,][0-9](?![0-9]))?")


def _tenor_list(max_digits: int) -> str:
    number = rf"(?>[0-9]{{1,{max_digits}}}(?:[.,][0-9](?![0-9]))?)"
    return rf"(?P<list>{number}(?>(?:{_TENOR_SEPARATOR}{number})*))"


_TENOR_CUE_SOURCE = rf"(?<![\w.])(?:tenor|jangka\s+waktu)(?:-?nya)?(?!\w){_FILLERS}"
_TENOR_CUE = re.compile(_TENOR_CUE_SOURCE, re.IGNORECASE)
# After a cue the unit may be left out (months) and "36x" counts installments.
_CUED_TENOR = re.compile(
    rf"{_TENOR_CUE_SOURCE}{_tenor_list(4)}"
    rf"(?:\s*(?P<months>{_MONTHS}|x|kali)|\s*(?P<years>{_YEARS}|th))?(?![\w%])",
    re.IGNORECASE,
)
# Anywhere else a unit is required; at most three digits, so "civic 2024, 3 tahun" is 3 years,
# and "th" only after a space, so that ordinals ("5th gen") are not years. Lists are found whole
# and their unit checked after, which keeps long lists of numbers linear.
_TENOR_LIST = re.compile(rf"(?<![\w.,\-\u2212\u2013/]){_tenor_list(3)}", re.IGNORECASE)
_UNIT = re.compile(
    rf"\s*(?:(?P<months>{_MONTHS})|(?P<years>{_YEARS}|(?<=\s)th))(?!\w)", re.IGNORECASE
)

_CURRENCY = re.compile(
    r"(?<![a-z])(?:(?P<rupiah>rp|idr|rupiah)|us\$|usd|eur|euros?|dollars?)(?![a-z])|[$€]",
    re.IGNORECASE,
)
_INDONESIAN = re.compile(
    r"(?<![a-z])(?:juta|jt|ribu|rb|miliar|milyar|harga|seharga|uang\s+muka|tahun|thn|bulan|bln"
    r"|cicilan|angsuran|berapa|atau|dengan|selama|jangka\s+waktu|kredit)(?![a-z])",
    re.IGNORECASE,
)

# For notes: the words after a cue that were meant as its value.
_WORD = re.compile(r"\S+")
_AMOUNT_WORD = re.compile(
    r"[-\u2212\u2013$€].*|.*[0-9].*|%|persen|percent|rp|idr|usd|eur|rupiah|dollars?"
    r"|nol|satu|dua|tiga|empat|lima|enam|tujuh|delapan|sembilan|sepuluh|sebelas|belas|puluh"
    r"|ratus|seratus|seribu|sejuta|setengah|zero|one|two|three|four|five|six|seven|eight|nine"
    r"|ten|eleven|twelve|twenty|thirty|forty|fifty|hundred|half"
    rf"|{_MAGNITUDE}|{_MONTHS}|{_YEARS}",
    re.IGNORECASE,
)
# A cue followed by one of these asks for the value rather than giving one ("dp-nya berapa?").
_NOT_A_VALUE = re.compile(
    r"berapa|brp|gimana|bagaimana|how|what|which|much|dan|and|atau|or|untuk|buat|for|dengan"
    r"|with|yang|di|ke|the|to|in|per|nya|&|cicilan|angsuran|bunga|tenor|dp|harga|price|budget"
    r"|otr|kredit|loan|installment|monthly|bulanan",
    re.IGNORECASE,
)


def parse_amount(text: str) -> Decimal | None:
    """The amount written in `text` ("Rp 1,2 M", "$30k", "250.000"), or None."""
    match = _AMOUNT.fullmatch(text.strip())
    if match is None or match["sign"] or match["sign2"]:
        return None
    return _amount(match, rupiah=False)


def parse_financing(query: str) -> FinancingTerms:
    """The down payment, tenors and price stated in `query`; what cannot be read is noted."""
    rupiah = _rupiah_context(query)
    notes: list[tuple[int, str]] = []
    values: list[tuple[str, _Value]] = []
    for cue, label in ((_DOWN_PAYMENT_CUE, "down payment"), (_PRICE_CUE, "price")):
        is_down = cue is _DOWN_PAYMENT_CUE
        for match in cue.finditer(query):
            value = _read_value(query, match.end(), rupiah)
            if value is not None and (is_down or value.share is None):
                values.append((label, value))
            elif text := _value_text(query, match.end(), any_word=is_down):
                notes.append((match.end(), f"{label} '{text}' not understood; ignored"))
    for match in _VALUE_BEFORE_DOWN.finditer(query):
        if not any(v.start < match.end() and match.start() < v.end for _, v in values):
            values.append(("down payment", _value(match, rupiah)))

    down_payment, share, price = None, None, None
    for label, value in sorted(values, key=lambda found: found[1].start):
        if value.problem is not None:
            notes.append((value.start, f"{label} '{value.text}' {value.problem}; ignored"))
        elif value.share is not None and share is None:
            share = value.share
        elif value.amount is not None and label == "price" and price is None:
            price = value.amount
        elif value.amount is not None and label == "down payment" and down_payment is None:
            down_payment = value.amount
        else:
            notes.append((value.start, f"{label} '{value.text}' ignored: one is given already"))

    # Claimed values are blanked so that "dp 50, 36 bulan" is not the tenor list "50, 36 bulan".
    masked = list(query)
    for _, value in values:
        masked[value.start : value.end] = " " * (value.end - value.start)
    rest = "".join(masked)
    tenors: list[tuple[int, int]] = []
    cued: list[tuple[int, int]] = []
    for cue_match in _TENOR_CUE.finditer(rest):
        tenor = _CUED_TENOR.match(rest, cue_match.start())
        if tenor is not None:
            cued.append(tenor.span())
            _read_tenors(tenor.start("list"), tenor["list"], tenor, tenors, notes)
        elif text := _value_text(rest, cue_match.end(), any_word=True):
            notes.append((cue_match.end(), f"tenor '{text}' not understood; ignored"))
    for listed in _TENOR_LIST.finditer(rest):
        unit = _UNIT.match(rest, listed.end())
        if unit and not any(start < unit.end() and listed.start() < end for start, end in cued):
            _read_tenors(listed.start(), listed["list"], unit, tenors, notes)

    return FinancingTerms(
        down_payment=down_payment,
        down_payment_share=share,
        tenors_months=tuple(dict.fromkeys(months for _, months in sorted(tenors))),
        price=price,
        notes=tuple(note for _, note in sorted(notes)),
    )


@dataclass(frozen=True, slots=True)
class _Value:
    start: int
    end: int
    text: str  # as written, for notes
    amount: Decimal | None = None
    share: Decimal | None = None
    problem: str | None = None  # why it is ignored


def _read_value(query: str, start: int, rupiah: bool) -> _Value | None:
    match = _VALUE.match(query, start)
    # "dp 3 tahun" has no down payment, and its "3 tahun" is read as a tenor.
    if match is None or (match["percent"] is None and _UNIT.match(query, match.end())):
        return None
    return _value(match, rupiah)


def _value(match: re.Match[str], rupiah: bool) -> _Value:
    start, end, text = match.start(), match.end(), match.group().strip()
    if match["percent_sign"] or match["sign"] or match["sign2"]:
        return _Value(start, end, text, problem="is negative")
    if match["percent"] is not None:
        percent = _number(match["percent"])
        if percent is None:
            return _Value(start, end, text, problem="not understood")
        if percent > 100:
            return _Value(start, end, text, problem="is not between 0 and 100 %")
        return _Value(start, end, text, share=_exact(percent / 100))
    amount = _amount(match, rupiah)
    if amount is None:
        return _Value(start, end, text, problem="not understood")
    return _Value(start, end, text, amount=amount)


def _amount(match: re.Match[str], rupiah: bool) -> Decimal | None:
    number = _number(match["number"])
    if number is None:
        return None
    currency = (match["prefix"] or match["suffix"] or "").strip()
    if currency:
        rupiah = _RUPIAH.match(currency) is not None
    magnitude = (match["magnitude"] or "").lower().removesuffix("an").removesuffix("-")
    factor = (10**9 if rupiah else 10**6) if magnitude == "m" else _MAGNITUDES.get(magnitude, 1)
    with localcontext() as context:
        context.prec = 60
        return _exact(number * factor)


def _number(text: str) -> Decimal | None:
    """Digits and separators as a number, by the rules in the module docstring."""
    if len(text) > 30:
        return None
    groups = re.split(r"[.,]", text)
    separators = re.findall(r"[.,]", text)
    if not separators:
        return Decimal(text)
    if len(set(separators)) == 2:
        if separators.count(separators[-1]) > 1:
            return None
        whole, fraction = groups[:-1], groups[-1]
    elif all(len(group) == 3 for group in groups[1:]) and groups[0] != "0":
        whole, fraction = groups, "0"
    elif len(groups) == 2:
        whole, fraction = groups[:1], groups[1]
    else:
        return None
    if len(whole) > 1 and not (len(whole[0]) <= 3 and all(len(group) == 3 for group in whole[1:])):
        return None
    return Decimal(f"{''.join(whole)}.{fraction}")


def _exact(value: Decimal) -> Decimal:
    """`value` without trailing zeros: 250000 rather than 250000.0, 0.2 rather than 0.20."""
    return value.quantize(Decimal(1)) if value == value.to_integral_value() else value.normalize()


def _read_tenors(
    start: int,
    listed: str,
    unit: re.Match[str],
    tenors: list[tuple[int, int]],
    notes: list[tuple[int, str]],
) -> None:
    """Reads the numbers of `listed` (at `start`) in the months or years of `unit`."""
    written_unit = unit["months"] or unit["years"] or ""
    per_unit = 12 if unit["years"] else 1
    for number in _TENOR_NUMBER.finditer(listed):
        position = start + number.start()
        written = f"{number.group()} {written_unit}".rstrip()
        months = Decimal(number.group().replace(",", ".")) * per_unit
        if months != months.to_integral_value():
            notes.append((position, f"tenor '{written}' is not a whole number of months; ignored"))
        elif not 1 <= months <= MAX_TENOR_MONTHS:
            notes.append(
                (
                    position,
                    f"tenor '{written}' is not between 1 and {MAX_TENOR_MONTHS} months; ignored",
                )
            )
        else:
            tenors.append((position, int(months)))


def _rupiah_context(query: str) -> bool:
    """Whether a bare "M" in `query` means miliar: its first currency says, else its language."""
    currency = _CURRENCY.search(query)
    if currency is not None:
        return currency["rupiah"] is not None
    return _INDONESIAN.search(query) is not None


def _value_text(query: str, start: int, *, any_word: bool) -> str:
    """The words at `start` meant as a value, or "": amount-like words ("lima puluh juta") or,
    with `any_word`, one other word that ends the clause ("dp abc", but not "dp honda civic")."""
    words: list[str] = []
    for match in _WORD.finditer(query, start):
        word = match.group().rstrip(".,;:!?)")
        if not _AMOUNT_WORD.fullmatch(word):
            clause_ends = word != match.group() or not query[match.end() :].strip()
            if any_word and not words and word and clause_ends and not _NOT_A_VALUE.fullmatch(word):
                words.append(word)
            break
        words.append(word)
        if word != match.group() or len(words) == 6:
            break
    return " ".join(words)
