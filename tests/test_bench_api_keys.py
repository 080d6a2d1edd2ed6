"""bench.api_keys on a few requests: both keys search, and the report says what a stored key
adds at p95."""

from __future__ import annotations

import asyncio

import pytest
from bench import api_keys


def test_both_keys_search_and_the_difference_is_reported(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    times = asyncio.run(api_keys.measure(dsn, 5))
    assert {name: len(values) for name, values in times.items()} == {
        "CARI_API_KEYS": 5,
        "stored key": 5,
        "lookup": 1,
    }
    api_keys.report(times)
    printed = capsys.readouterr().out
    assert "CARI_API_KEYS: p50" in printed and "stored key: p50" in printed
    assert "a stored key adds" in printed and "lookup:" in printed
