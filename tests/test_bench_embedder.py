"""The embedder benchmark end to end on a few texts: both policies run in their own process and
the table compares them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_compares_both_policies_in_one_run() -> None:
    command = [sys.executable, "-m", "bench.embedder", "--queries", "3", "--passages", "4"]
    result = subprocess.run(
        [*command, "--load", "1"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    rows = {line[:32].strip(): line[32:].split() for line in lines[2:]}
    assert set(rows) == {
        "alone",
        "beside 1 busy processes",
        "during a document job",
        "passages per second",
    }
    for name, cells in rows.items():
        numbers = [float(cell) for cell in cells if cell != "/"]
        assert all(value > 0 for value in numbers), (name, cells)
        assert len(numbers) == (3 if name == "passages per second" else 5)
