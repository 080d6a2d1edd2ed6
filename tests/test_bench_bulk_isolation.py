"""The bulk-isolation benchmark on a few records: every run loads every record, writes go on
beside each load, and only the old statement sequence takes the other collection's index."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from bench import bulk_isolation, ingest_path

TINY = Path(__file__).parent / "fixtures" / "beir-tiny"  # passages in the repo


def test_each_sequence_loads_everything_beside_live_writes(
    server_url: str, clean_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with ingest_path.fast_embedder() as env:
        env = {**env, "CARI_EMBEDDERS": bulk_isolation.embedders(env)}
        for key, value in {**env, "DATABASE_URL": server_url}.items():
            monkeypatch.setenv(key, value)
        runs = asyncio.run(
            bulk_isolation.isolation(2000, 60, 1, env, corpora=[TINY], words_per_record=40)
        )
    assert [(r.layout, r.variant) for r in runs] == [
        ("same-width", "before"),
        ("same-width", "after"),
        ("own-width", "before"),
        ("own-width", "after"),
    ]
    for run in runs:
        assert run.chunks == 60 and run.errors == 0, run
        assert run.plans and run.line()
    # The new sequence never takes the live collection its index (with 2,000 chunks the planner
    # prefers it to an exact scan).
    assert all(r.indexed_plans == r.plans for r in runs if r.variant == "after")
