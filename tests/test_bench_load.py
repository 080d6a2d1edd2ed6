"""The load benchmark on a 200-chunk corpus: the real `cari serve` in a subprocess, embedding
through the local fake, 1 s per cell at 1 and 2 clients; and its summary on hand-made numbers."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
from pathlib import Path

import httpx
import numpy as np
import psutil
import psycopg
import pytest
from bench import load, search

from cari.runtime import make_pool
from cari.search import router
from cari.settings import Settings
from tests.conftest import cli_env, settings_for
from tests.fake_openai import FakeOpenAI

CHUNKS = 200
TINY = Path(__file__).parent / "fixtures" / "beir-tiny"  # passages and questions, in the repo
QUERIES = 4  # all of the tiny set's
DURATION = 0.5
CONCURRENCY = [1, 2]
CELL_KEYS = {
    "concurrency",
    "requests",
    "errors",
    "seconds",
    "throughput_rps",
    "scaling",
    "p50_ms",
    "p95_ms",
    "p99_ms",
}


def test_summarize_on_hand_made_numbers() -> None:
    assert load.summarize([float(ms) for ms in range(100, 0, -1)], 2, 4.0) == {
        "requests": 102,
        "errors": 2,
        "seconds": 4.0,
        "throughput_rps": 25.0,  # successful requests only
        "p50_ms": 50.5,
        "p95_ms": 95.05,
        "p99_ms": 99.01,
    }
    one = load.summarize([7.0], 0, 0.5)
    assert (one["p50_ms"], one["p95_ms"], one["p99_ms"], one["throughput_rps"]) == (7, 7, 7, 2)
    failed = load.summarize([], 3, 1.0)
    assert failed["requests"] == 3 and failed["throughput_rps"] == 0
    assert failed["p50_ms"] is failed["p99_ms"] is None


def serving_processes() -> list[int]:
    found = []
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):  # it may exit while we look
            if "cari.cli" in child.cmdline():
                found.append(child.pid)
    return found


async def load_tiny_corpus(dsn: str, settings: Settings) -> None:
    """CHUNKS chunks of the tiny set's passages, with synthetic vectors, into `dsn`."""
    base = np.random.default_rng(0).standard_normal((8, settings.embedding_dimension))
    base = (base / np.linalg.norm(base, axis=1, keepdims=True)).astype(np.float32)
    vectors, _ = search.synthetic_vectors(base, CHUNKS)
    pool = make_pool(dsn, settings)
    await pool.open(wait=True)
    try:
        await search.load_corpus(pool, settings, search.load_passages([TINY]), vectors)
    finally:
        await pool.close()


def test_measures_every_cell_through_the_real_server(
    dsn: str, fake: FakeOpenAI, clean_env: dict[str, str], tmp_path: Path
) -> None:
    settings = settings_for(dsn, reembed_interval_s=0, statement_timeout_ms=0)
    queries = search.load_queries(QUERIES, [TINY])
    assert len(queries) == QUERIES

    async def run() -> dict[str, object]:
        await load_tiny_corpus(dsn, settings)
        return await load.measure(
            dsn,
            queries,
            modes=search.MODES,
            concurrencies=CONCURRENCY,
            duration=DURATION,
            max_requests=100_000,
            env=cli_env(clean_env, dsn, fake),
        )

    measured = asyncio.run(run())
    assert serving_processes() == []

    out = tmp_path / "results" / "load.json"
    load.save({"runs": [{"chunks": CHUNKS, **measured}]}, out)
    report = json.loads(out.read_text())["runs"][0]
    assert set(report["baseline"]) == {"healthz", "collection"}
    assert {mode: set(phases) for mode, phases in report["modes"].items()} == {
        "keyword": {"none"},
        "vector": {"computed", "cached"},
        "hybrid": {"computed", "cached"},
    }
    sweeps = [(name, "baseline", cells) for name, cells in report["baseline"].items()]
    sweeps += [
        (mode, phase, cells)
        for mode, phases in report["modes"].items()
        for phase, cells in phases.items()
    ]
    for what, phase, cells in sweeps:
        assert [cell["concurrency"] for cell in cells] == CONCURRENCY, what
        assert cells[0]["scaling"] == 1.0
        for cell in cells:
            assert set(cell) >= CELL_KEYS, (what, phase)
            assert cell["requests"] > 0 and cell["errors"] == 0, (what, phase, cell)
            assert cell["p50_ms"] <= cell["p95_ms"] <= cell["p99_ms"]
            assert cell["seconds"] >= DURATION  # and more by the requests in flight at its end
            rate = cell["requests"] / cell["seconds"]
            assert cell["throughput_rps"] == pytest.approx(rate, rel=1e-3)
            if phase == "baseline":
                assert "vectors_cached" not in cell, (what, cell)
                continue
            # Every search (and each client's unmeasured first one) took its vectors from
            # where the phase says, at least one each; keyword mode asked for none.
            taken = {"cached": "vectors_cached", "computed": "vectors_computed"}.get(phase)
            for source in ("vectors_cached", "vectors_computed"):
                if source == taken:
                    assert cell[source] >= cell["requests"], (what, phase, cell)
                else:
                    assert cell[source] == 0, (what, phase, cell)
            # The searcher's own time is part of the client's.
            assert 0 < cell["server_mean_ms"] < cell["p99_ms"], (what, phase, cell)

    # The fake embedded every computed request (and each client's unmeasured first one), each
    # question once while the cache was warmed, and each of the two servers the intent router's
    # example questions once: the cached phase embedded nothing else.
    computed = [report["modes"][mode]["computed"] for mode in ("vector", "hybrid")]
    expected = sum(cell["requests"] for cells in computed for cell in cells)
    examples = len(router.SPECS_EXAMPLES) + len(router.OTHER_EXAMPLES)
    expected += 2 * sum(CONCURRENCY) + QUERIES + 2 * examples
    assert sum(len(texts) for texts in fake.inputs) == expected

    # The servers' own scrapes: every search a client sent (the measured ones and each client's
    # first) counted once under its mode, with the stages that mode runs; and the baselines.
    sent = {
        phase: {
            mode: sum(c["requests"] + c["concurrency"] for c in report["modes"][mode][phase])
            for mode in report["modes"]
            if phase in report["modes"][mode]
        }
        for phase in ("computed", "cached")
    }
    sent["computed"]["keyword"] = sum(
        c["requests"] + c["concurrency"] for c in report["modes"]["keyword"]["none"]
    )
    sent["cached"]["vector"] += QUERIES  # the warm-up: each question once
    for server, modes in sent.items():
        scraped = report["metrics"][server]
        for mode, count in modes.items():
            assert scraped[f'cari_search_duration_seconds_count{{mode="{mode}"}}'] == count
            stage = "keyword" if mode == "keyword" else "vector"
            key = f'cari_search_stage_duration_seconds_count{{mode="{mode}",stage="{stage}"}}'
            assert scraped[key] == count, (server, mode)
        assert not any(key.startswith("cari_search_degraded_total") for key in scraped)
    route = 'app_name="cari",method="GET",path="/healthz",status_code="200"'
    healthz = sum(c["requests"] + c["concurrency"] for c in report["baseline"]["healthz"])
    assert report["metrics"]["computed"][f"cari_requests_total{{{route}}}"] == healthz
    stages = load.format_stages(measured)
    assert len(stages) == 5 and all("searches, mean ms: total" in line for line in stages)

    table = load.format_table(measured)
    assert len(table) == 1 + 7 * len(CONCURRENCY)
    assert any(line.startswith("hybrid") and " cached " in line for line in table)


def test_server_is_stopped_when_the_run_fails(
    dsn: str, fake: FakeOpenAI, clean_env: dict[str, str]
) -> None:
    started: list[subprocess.Popen[bytes]] = []

    async def fail_while_serving() -> None:
        async with load.served(dsn, cli_env(clean_env, dsn, fake)) as server:
            started.append(server.process)
            async with httpx.AsyncClient(base_url=server.url) as http:
                assert (await http.get("/healthz")).status_code == 200
            raise RuntimeError("the run failed")

    with pytest.raises(RuntimeError, match="the run failed"):
        asyncio.run(fail_while_serving())
    assert started[0].returncode == 0  # stopped by SIGTERM, gracefully
    assert serving_processes() == []


def test_a_server_that_cannot_start_is_reported(
    dsn: str, fake: FakeOpenAI, clean_env: dict[str, str]
) -> None:
    env = {**cli_env(clean_env, dsn, fake), "CARI_EMBEDDING_DIMENSIONS": "8"}
    with psycopg.connect(dsn) as conn:  # a collection of 384-d vectors the embedder cannot fit
        conn.execute("INSERT INTO collections (name) VALUES ('c')")

    async def serve() -> None:
        async with load.served(dsn, env):
            pass

    with pytest.raises(RuntimeError, match=r"exited with 1[\s\S]*384"):
        asyncio.run(serve())
