"""bench.replicas' accounting on real processes and hand-made cells (the whole benchmark needs
three PostgreSQL servers and minutes: it is run by hand, docs/benchmarks.md)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import psutil
from bench import replicas

# The child says when it has burnt its 0.3 s (its output is the parent's, a pipe to the test).
BURN = (
    "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n"
    "print('burnt', flush=True)\n"
)
PARENT = (
    "import subprocess, sys, time\n"
    f"subprocess.Popen([sys.executable, '-c', {BURN + 'time.sleep(30)'!r}])\n"
    "time.sleep(30)\n"
)


def _children_seconds(pid: int) -> float:
    found = replicas.cpu_seconds(pid, tree=True)
    return sum(seconds for child, seconds in found.items() if child != pid)


def test_cpu_of_a_process_tree_counts_its_children() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        before = replicas.cpu_seconds(parent.pid, tree=True)
        # The child burns 0.3 s of CPU, then sleeps: it started after `before`, all of it counts.
        assert parent.stdout is not None and parent.stdout.readline() == "burnt\n"
        assert _children_seconds(parent.pid) >= 0.25
        # The kernel counts in clock ticks: it may show a few hundredths less than 0.3 s.
        assert replicas.used(before, replicas.cpu_seconds(parent.pid, tree=True)) >= 0.25
        assert replicas.used(before, replicas.cpu_seconds(parent.pid, tree=False)) < 0.2
    finally:
        for process in psutil.Process(parent.pid).children():
            process.kill()
        parent.kill()
        parent.communicate()
    assert replicas.used({1: 1.0}, {1: 1.5, 2: 0.25}) == 0.75


def _cell(rps: float, cores: dict[str, float], served: dict[str, float]) -> dict[str, Any]:
    return {
        "throughput_rps": rps,
        "p50_ms": 10.0,
        "p95_ms": 20.0,
        "errors": 0,
        "cores": cores,
        "served_by": served,
    }


def test_summary_averages_rounds_against_the_primary() -> None:
    cores = {"primary": 1.0, "replica1": 0.0, "cari serve": 0.5, "load generator": 0.2}
    rounds = [
        {
            "primary": {"keyword": _cell(50.0, cores, {"primary": 750})},
            "1 standby": {"keyword": _cell(60.0, {**cores, "primary": 0.0}, {"replica1": 900})},
        },
        {
            "primary": {"keyword": _cell(70.0, cores, {"primary": 1050})},
            "1 standby": {"keyword": _cell(60.0, {**cores, "primary": 0.1}, {"replica1": 900})},
        },
    ]
    summary = replicas.summarize(rounds)
    primary, standby = summary["primary"]["keyword"], summary["1 standby"]["keyword"]
    assert primary["throughput_rps"] == [50.0, 70.0] and primary["mean_rps"] == 60.0
    assert primary["vs_primary"] == 1.0 and standby["vs_primary"] == 1.0
    assert standby["cores"]["primary"] == 0.05 and standby["served_by"] == {"replica1": 1800}
    lines = replicas.format_table(summary, ["primary", "replica1"])
    assert "50.0 / 70.0" in lines[2] and "1,800" in lines[3]
