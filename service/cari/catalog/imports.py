"""Catalog items and financing rates from CSV or JSON Lines files, each row validated.

CSV: a header row. Catalog columns `sku`, `name`, `variant`, `price`, `currency` are the item's
fields and every other column is an attribute (a spec) named by its header; an empty attribute
cell is left out, a plain decimal number ("7", "1.5") becomes a number, `true`/`false` a
boolean, and anything else stays text ("1.5L", "007", "+62 21 555"). Rate columns are
`provider`, `tenor_months`, `rate`, `rate_type`, `min_down_payment`; no other is allowed.
JSON Lines: one object per line, the same fields as the HTTP body.
"""

from __future__ import annotations

import csv
import io
import re
import sys
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

import msgspec

from cari.catalog import store
from cari.errors import InvalidInput
from cari.schema.catalog import CatalogItemIn, FinancingRateIn

Format = Literal["csv", "jsonl"]
T = TypeVar("T")

FORMATS: dict[str, Format] = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}
CATALOG_FIELDS = ("sku", "name", "variant", "price", "currency")
RATE_FIELDS = ("provider", "tenor_months", "rate", "rate_type", "min_down_payment")
STDIN = "-"

# A plain number of at most 15 integer digits; a leading zero (a code: 007) keeps it text.
_NUMBER = re.compile(r"-?(?:0|[1-9]\d{0,14})(?:\.\d{1,15})?")


@dataclass(slots=True)
class Loaded(Generic[T]):
    """The valid records, where each came from ("FILE:LINE"), and every problem found."""

    items: list[T] = field(default_factory=list)
    places: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # "FILE:LINE: field: message"


def load_catalog(paths: Sequence[str], fmt: Format | None = None) -> Loaded[CatalogItemIn]:
    """Every item of `paths` ('-' is stdin), each SKU once."""
    loaded = _load(paths, fmt, _CATALOG, store.catalog_item)
    for later, earlier in store.duplicates([item.sku for item in loaded.items]):
        loaded.errors.append(
            f"{loaded.places[later]}: sku: '{loaded.items[later].sku}' appears twice "
            f"(also {loaded.places[earlier]})"
        )
    return loaded


def load_rates(paths: Sequence[str], fmt: Format | None = None) -> Loaded[FinancingRateIn]:
    """Every financing rate of `paths`, each provider + tenor + rate type once."""
    loaded = _load(paths, fmt, _RATES, store.financing_rate)
    keys: list[Hashable] = [store.rate_key(rate) for rate in loaded.items]
    for later, earlier in store.duplicates(keys):
        loaded.errors.append(
            f"{loaded.places[later]}: provider: {store.describe_rate(loaded.items[later])} "
            f"appears twice (also {loaded.places[earlier]})"
        )
    return loaded


def _load(
    paths: Sequence[str], fmt: Format | None, layout: _Layout, validate: Callable[[object], T]
) -> Loaded[T]:
    loaded: Loaded[T] = Loaded()
    for path in paths:
        for place, record in _records(path, fmt, layout):
            try:
                if isinstance(record, InvalidInput):
                    raise record
                item = validate(record)
            except InvalidInput as exc:
                loaded.errors.append(f"{place}: {exc.message}")
                continue
            loaded.items.append(item)
            loaded.places.append(place)
    return loaded


Record = tuple[str, object]  # ("FILE:LINE", the JSON value or an InvalidInput)


def _records(path: str, fmt: Format | None, layout: _Layout) -> Iterator[Record]:
    name = "<stdin>" if path == STDIN else path
    chosen = fmt or ("jsonl" if path == STDIN else FORMATS.get(Path(path).suffix.lower()))
    if chosen is None:
        message = "unknown format: name it .csv, .jsonl or .ndjson, or pass --format"
        yield f"{name}:1", InvalidInput("file", message)
    elif chosen == "jsonl":
        if path == STDIN:
            yield from _jsonl(name, sys.stdin.buffer)
        else:
            with Path(path).open("rb") as lines:
                yield from _jsonl(name, lines)
    else:
        yield from _csv(
            name, sys.stdin.buffer.read() if path == STDIN else Path(path).read_bytes(), layout
        )


def _jsonl(name: str, lines: Iterable[bytes]) -> Iterator[Record]:
    for number, line in enumerate(lines, 1):
        if line.strip():
            try:
                yield f"{name}:{number}", msgspec.json.decode(line)
            except msgspec.DecodeError as exc:
                yield f"{name}:{number}", InvalidInput("line", f"not valid JSON ({exc})")


def _csv(name: str, data: bytes, layout: _Layout) -> Iterator[Record]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        yield f"{name}:{line}", InvalidInput("file", "not valid UTF-8")
        return
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [layout.column(cell.strip()) for cell in next(reader, [])]
        if problem := layout.header_problem(header):
            yield f"{name}:1", problem
            return
        for cells in reader:
            place = f"{name}:{reader.line_num}"
            if not any(cell.strip() for cell in cells):
                continue
            if len(cells) != len(header):
                message = f"has {len(cells)} cells, the header {len(header)}"
                yield place, InvalidInput("row", message)
                continue
            yield place, layout.row(dict(zip(header, (c.strip() for c in cells), strict=True)))
    except csv.Error as exc:
        yield f"{name}:{reader.line_num}", InvalidInput("row", str(exc))


@dataclass(frozen=True, slots=True)
class _Layout:
    """The columns of one kind of CSV file, and how a row becomes a record."""

    fields: tuple[str, ...]
    required: tuple[str, ...]
    row: Callable[[dict[str, str]], dict[str, Any]]
    attributes: bool  # other columns are attributes; else they are an error

    def column(self, name: str) -> str:
        """A field's column in any case ("SKU"); an attribute's as written."""
        return name.lower() if name.lower() in self.fields else name

    def header_problem(self, header: list[str]) -> InvalidInput | None:
        if not any(header):
            return InvalidInput("header", "is missing: the first row names the columns")
        for column in header:
            if not column:
                return InvalidInput("header", "a column has no name")
            if header.count(column) > 1:
                return InvalidInput(column, "the column appears twice")
            if not self.attributes and column not in self.fields:
                return InvalidInput(column, f"unknown column (known: {', '.join(self.fields)})")
        missing = [column for column in self.required if column not in header]
        return InvalidInput(missing[0], "the column is missing") if missing else None


def _catalog_row(cells: dict[str, str]) -> dict[str, Any]:
    # An empty field cell takes the default (no price, IDR, no variant); sku and name stay, so
    # that an empty one is reported.
    record: dict[str, Any] = {
        column: cell
        for column, cell in cells.items()
        if column in CATALOG_FIELDS and (cell or column in ("sku", "name"))
    }
    record["attributes"] = {
        column: _attribute(cell)
        for column, cell in cells.items()
        if column not in CATALOG_FIELDS and cell
    }
    return record


def _attribute(cell: str) -> Any:
    if _NUMBER.fullmatch(cell):
        return float(cell) if "." in cell else int(cell)
    if cell.lower() in ("true", "false"):
        return cell.lower() == "true"
    return cell


def _rate_row(cells: dict[str, str]) -> dict[str, Any]:
    record: dict[str, Any] = {column: cell for column, cell in cells.items() if cell}
    tenor = record.get("tenor_months", "")
    if tenor.isascii() and tenor.isdigit():
        record["tenor_months"] = int(tenor)
    return record


_CATALOG = _Layout(CATALOG_FIELDS, ("sku", "name"), _catalog_row, attributes=True)
_RATES = _Layout(RATE_FIELDS, RATE_FIELDS[:4], _rate_row, attributes=False)
