"""bench.keyword_damage on a small collection: both halves of `cari bm25 check` run and agree
that nothing is damaged, and a search from the chunks' own words equals the walk's."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from bench import keyword_damage

from cari.db.queries import query


def test_the_check_and_both_searches_run_and_agree(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with psycopg.connect(dsn) as conn:
        if conn.execute(query("keyword_engine")).fetchone() is None:
            pytest.skip("the server has no cari_bm25 extension (no C compiler?)")
    asyncio.run(keyword_damage.measure(dsn, 400, 1, 1))
    printed = capsys.readouterr().out
    assert "400 chunks loaded and folded" in printed
    assert "check, round 1: every block read alone" in printed
    assert printed.count("the same results") == len(keyword_damage.QUERIES)
