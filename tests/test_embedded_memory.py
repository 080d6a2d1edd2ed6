"""The embedded server's memory settings, derived from the machine's memory."""

from __future__ import annotations

import psutil

from cari import embedded


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
