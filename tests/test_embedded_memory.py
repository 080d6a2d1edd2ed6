"""The embedded server's settings: memory, derived from the machine's, and pg_stat_statements."""

from __future__ import annotations

import psutil
import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from cari.db import embedded


def test_shared_buffers_is_a_quarter_of_memory_within_bounds() -> None:
    assert embedded.memory_config(None, 24_576) == {
        "shared_buffers": "6144MB",
        "effective_cache_size": "12288MB",
    }
    # Never below PostgreSQL's default, never above 8 GB.
    assert embedded.memory_config(None, 256)["shared_buffers"] == "128MB"
    assert embedded.memory_config(None, 256)["effective_cache_size"] == "128MB"
    assert embedded.memory_config(None, 262_144)["shared_buffers"] == "8192MB"
    # The setting wins.
    assert embedded.memory_config(512, 24_576)["shared_buffers"] == "512MB"


def test_machine_memory_is_bounded_by_the_machine() -> None:
    measured = embedded.machine_memory_mb()
    assert 0 < measured <= psutil.virtual_memory().total // 2**20


def test_embedded_server_preloads_pg_stat_statements(server_url: str) -> None:
    """A fresh embedded server starts with pg_stat_statements loaded (a running one takes it at
    its next start), and Cari's database has its views: a DBA reads what Cari ran."""
    assert "shared_preload_libraries" in embedded.RESTART_SETTINGS
    if "/embedded" not in server_url:
        pytest.skip("the session's server is not the embedded one")
    with psycopg.connect(make_conninfo(server_url, dbname=embedded.DATABASE_NAME)) as conn:
        conn.execute("SELECT 424242 AS cari_probe").fetchone()
        [count] = conn.execute(
            "SELECT count(*) FROM pg_stat_statements WHERE query LIKE '%cari_probe%'"
        ).fetchone() or [0]
    assert count >= 1
