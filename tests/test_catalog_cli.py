"""`cari catalog` and `cari rates` as real subprocesses on real PostgreSQL, embedding through
the local OpenAI-compatible fake."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest

from cari.catalog import imports
from tests.conftest import cli_env
from tests.fake_openai import FakeOpenAI
from tests.test_ingest_cli import cari

CARS_CSV = """\
SKU,name,variant,price,currency,engine,seats,bluetooth,code,fuel economy
VLZ-15-Q,Honda Veloz,1.5 Q CVT,315000000,IDR,1.5L,7,true,007,
"CVC-RS","Honda Civic, RS",,598500000.50,,1.5L turbo,5,false,12A,15.3
"""


@pytest.fixture
def env(clean_env: dict[str, str], dsn: str, fake: FakeOpenAI) -> dict[str, str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO collections (name, language) VALUES ('shop', 'english')")
    return {**cli_env(clean_env, dsn, fake), "COLUMNS": "200"}  # tables unwrapped


def catalog(dsn: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "SELECT sku, name, variant, price, currency, attributes, embedding IS NOT NULL "
            "FROM catalog_items ORDER BY sku"
        ).fetchall()


def test_csv_cells_become_fields_and_typed_attributes(tmp_path: Path) -> None:
    (tmp_path / "cars.csv").write_text(CARS_CSV)
    loaded = imports.load_catalog([str(tmp_path / "cars.csv")])
    assert loaded.errors == [] and loaded.places == [f"{tmp_path}/cars.csv:{n}" for n in (2, 3)]
    veloz, civic = loaded.items
    assert veloz.attributes == {"engine": "1.5L", "seats": 7, "bluetooth": True, "code": "007"}
    assert (civic.name, civic.variant, civic.price, civic.currency) == (
        "Honda Civic, RS",
        "",
        Decimal("598500000.50"),
        "IDR",
    )
    assert civic.attributes["fuel economy"] == 15.3 and civic.attributes["code"] == "12A"


def test_import_csv_and_jsonl_then_list(
    tmp_path: Path, dsn: str, env: dict[str, str], fake: FakeOpenAI
) -> None:
    (tmp_path / "cars.csv").write_text(CARS_CSV)
    first = cari(["catalog", "import", str(tmp_path / "cars.csv"), "-c", "shop"], env)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "shop: 2 items created, 0 updated"
    assert [len(inputs) for inputs in fake.inputs] == [2]
    assert catalog(dsn)[1] == (
        "VLZ-15-Q",
        "Honda Veloz",
        "1.5 Q CVT",
        Decimal("315000000.00"),
        "IDR",
        {"engine": "1.5L", "seats": 7, "bluetooth": True, "code": "007"},
        True,
    )

    lines = [
        {"sku": "CVC-RS", "name": "Honda Civic", "price": 589000000, "attributes": {"seats": 5}},
        {"sku": "AVZ-13", "name": "Toyota Avanza", "price": "240000000"},
    ]
    (tmp_path / "more.ndjson").write_text("\n".join(json.dumps(line) for line in lines) + "\n\n")
    second = cari(["catalog", "import", str(tmp_path / "more.ndjson"), "-c", "shop"], env)
    assert second.stdout.strip() == "shop: 1 items created, 1 updated", second.stderr
    assert [row[:4] for row in catalog(dsn)] == [
        ("AVZ-13", "Toyota Avanza", "", Decimal("240000000.00")),
        ("CVC-RS", "Honda Civic", "", Decimal("589000000.00")),
        ("VLZ-15-Q", "Honda Veloz", "1.5 Q CVT", Decimal("315000000.00")),
    ]

    stdin = json.dumps({"sku": "BRV", "name": "Honda BR-V"})
    third = cari(["catalog", "import", "-", "-c", "shop"], env, stdin=stdin)
    assert third.stdout.strip() == "shop: 1 items created, 0 updated", third.stderr

    listed = cari(["catalog", "list", "-c", "shop"], env)
    assert listed.returncode == 0, listed.stderr
    for text in ("AVZ-13", "Honda BR-V", "IDR 315,000,000.00", "seats: 7"):
        assert text in listed.stdout


def test_bad_rows_are_reported_and_nothing_is_written(
    tmp_path: Path, dsn: str, env: dict[str, str], fake: FakeOpenAI
) -> None:
    (tmp_path / "cars.csv").write_text(
        CARS_CSV + "BAD-1,Broken,,-5,IDR,,,,,\nBAD-2,,,1,idr,,,,,\nshort,row\n"
    )
    (tmp_path / "items.txt").write_text(
        '{"sku": "J1", "name": "Fine"}\n{"sku": "J2", "name": \n[1]\n'
        '{"sku": "VLZ-15-Q", "name": "Again"}\n'
    )
    csv_path, txt_path = tmp_path / "cars.csv", tmp_path / "items.txt"
    unknown = cari(["catalog", "import", str(txt_path), "-c", "shop"], env)
    assert unknown.returncode == 1
    assert f"{txt_path}:1: file: unknown format" in unknown.stderr

    result = cari(["catalog", "import", str(csv_path), "-c", "shop"], env)
    jsonl = cari(["catalog", "import", str(txt_path), "-c", "shop", "--format", "jsonl"], env)
    assert result.returncode == jsonl.returncode == 1
    assert result.stderr.splitlines() == [
        f"{csv_path}:4: price: must be ≥ 0",
        f"{csv_path}:5: name: is empty",
        f"{csv_path}:6: row: has 2 cells, the header 10",
        "3 bad rows: nothing written",
    ]
    assert jsonl.stderr.splitlines()[:2] == [
        f"{txt_path}:2: line: not valid JSON (Input data was truncated)",
        f"{txt_path}:3: item: must be an object, not list",
    ]
    assert catalog(dsn) == [] and fake.requests == []

    both = cari(["catalog", "import", str(txt_path), "-", "-c", "shop", "--format", "jsonl"],
                env, stdin='{"sku": "J1", "name": "Twice"}')  # fmt: skip
    assert f"<stdin>:1: sku: 'J1' appears twice (also {txt_path}:1)" in both.stderr


def test_rates_import_and_list(tmp_path: Path, dsn: str, env: dict[str, str]) -> None:
    (tmp_path / "rates.csv").write_text(
        "provider,tenor_months,rate,rate_type,min_down_payment\n"
        "BCA Finance,12,0.035,flat,0.2\n"
        "BCA Finance,36,0.045,flat,\n"
        "Adira,24,0.09,annuity,0.25\n"
    )
    result = cari(["rates", "import", str(tmp_path / "rates.csv"), "-c", "shop"], env)
    assert result.stdout.strip() == "shop: 3 rates created, 0 updated", result.stderr
    with psycopg.connect(dsn) as conn:
        stored = conn.execute(
            "SELECT provider, tenor_months, rate, rate_type, min_down_payment "
            "FROM financing_rates ORDER BY provider, tenor_months"
        ).fetchall()
    assert stored[1] == ("BCA Finance", 12, Decimal("0.035"), "flat", Decimal("0.2"))
    assert stored[2][4] == 0

    (tmp_path / "bad.csv").write_text(
        "provider,tenor_months,rate,rate_type\nBCA Finance,12,8.5,flat\nAdira,0,0.09,flat\n"
    )
    bad = cari(["rates", "import", str(tmp_path / "bad.csv"), "-c", "shop"], env)
    assert bad.returncode == 1
    assert bad.stderr.splitlines()[:2] == [
        f"{tmp_path}/bad.csv:2: rate: 8.5 is a yearly fraction below 1; 8.5 %/year is 0.085",
        f"{tmp_path}/bad.csv:3: tenor_months: must be 1 to 600, not 0",
    ]
    (tmp_path / "extra.csv").write_text("provider,tenor_months,rate,rate_type,bank\n")
    extra = cari(["rates", "import", str(tmp_path / "extra.csv"), "-c", "shop"], env)
    assert f"{tmp_path}/extra.csv:1: bank: unknown column" in extra.stderr

    listed = cari(["rates", "list", "-c", "shop"], env)
    assert "Adira" in listed.stdout and "│ 9 %" in listed.stdout and "│ 4.5 %" in listed.stdout

    missing = cari(["rates", "import", str(tmp_path / "rates.csv"), "-c", "nope"], env)
    assert missing.returncode == 1
    assert missing.stderr.strip() == "Error: collection 'nope' does not exist"
