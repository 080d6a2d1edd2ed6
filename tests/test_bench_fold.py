"""bench.fold on a small corpus: both versions of `bm25_fold` leave the same postings, folded
into a new collection and then into its blocks, each round rolled back."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from bench import fold

from cari.db.migrations import earlier_revision
from cari.db.queries import query


def test_both_versions_fold_the_same_postings_and_leave_nothing(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        if conn.execute(query("keyword_engine")).fetchone() is None:
            pytest.skip("the server has no cari_bm25 extension (no C compiler?)")
    assert fold.head_revision() >= "0022"
    source, documents = asyncio.run(fold.prepare(dsn, "pessimistic", 400, "english", 1))
    assert documents > 0
    rounds = [
        asyncio.run(fold.one_round(dsn, earlier_revision(name).FOLD, source, documents, "english"))
        for name in ("0018", fold.head_revision(), "0018")
    ]
    for new, into, first, second in rounds:
        assert new > 0 and into > 0
        assert first[0] > 0 and second[0] > 0  # blocks after each fold
    assert len({(r[2][1], r[3][1]) for r in rounds}) == 1  # the same postings every time
    with psycopg.connect(dsn) as conn:  # every round rolled back
        assert conn.execute(
            "SELECT count(*) FROM collections WHERE name = %s", (fold.COPIED,)
        ).fetchone() == (0,)
