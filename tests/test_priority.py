"""A batch job starved by its niceness says so (cari.cli.priority.warn_when_starved)."""

from __future__ import annotations

import os
import time

import anyio
import pytest

from cari.cli import priority


def test_a_job_is_starved_when_a_busy_machine_leaves_it_little_cpu() -> None:
    assert priority.starved(cpu_s=1.0, wall_s=15.0, load=6.0, cores=2)
    assert not priority.starved(cpu_s=5.0, wall_s=15.0, load=6.0, cores=2)  # a third of a core
    # An idle machine: the job waits on something else (PostgreSQL, a disk), not for the CPU.
    assert not priority.starved(cpu_s=1.0, wall_s=15.0, load=1.5, cores=2)


def test_a_starved_job_says_so_once_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(priority, "STARVED_WINDOW_S", 0.05)
    monkeypatch.setattr(os, "getloadavg", lambda: (9.0, 9.0, 9.0))
    cpu = time.process_time()
    monkeypatch.setattr(time, "process_time", lambda: cpu)  # no CPU while it waited

    async def main() -> None:
        with anyio.fail_after(60):
            await priority.warn_when_starved(19)  # returns once it has said it

    anyio.run(main)
    said = capsys.readouterr().err
    assert said.count("warning: this job got 0.0 s of CPU") == 1, said
    assert "niceness 19 (CARI_BATCH_NICENESS)" in said
    assert "CARI_BATCH_NICENESS=0 runs it" in said


def test_a_job_that_gets_the_cpu_says_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(priority, "STARVED_WINDOW_S", 0.05)
    monkeypatch.setattr(os, "getloadavg", lambda: (9.0, 9.0, 9.0))
    started = time.monotonic()
    # As much CPU as time went by: a core of its own.
    monkeypatch.setattr(time, "process_time", lambda: time.monotonic() - started)

    async def main() -> None:
        with anyio.move_on_after(0.5):
            await priority.warn_when_starved(19)

    anyio.run(main)
    assert capsys.readouterr().err == ""
